"""The process that runs one role's side of rehearsals on SGLang's stack:
`python -m pdctl.sglang_stack.driver` in SGLang's interpreter, pdctl importable.

SGLang's import costs seconds (6.5 s alone, 10-20 s on a loaded machine), and SGLang's managers cannot be
torn down (0.5.23's teardown destroys ZMQ contexts under live threads; NIXL agents keep a progress thread that
spins a core each). So the driver imports SGLang once and forks one child per case: the child builds the
case's ranks, moves its requests, and exits with everything it created; nothing accumulates and an idle
driver costs no CPU. Forking happens before any thread exists in the parent.

Protocol (strictly request/reply, so parent and child never read stdin at the same time): one JSON object
per stdin line; replies are stdout lines starting with "@@" (SGLang, NIXL and Mooncake print their own lines
to stdout too). First reply: {"ready": true, "sglang": version, ...}.
  {"cmd": "setup", "case": ID, "spec": SideSpec}  -> forks; {"case", "ok", "bootstrap_port", "setup_s", ...}
  {"cmd": "transfer", "case": ID, "room": N}       -> {"case", "ok", "stage", "error", timings, ...}
  {"cmd": "abort"}   (while a transfer runs: stop waiting, the peer side failed; no reply)
  {"cmd": "end", "case": ID}  -> the case's process exits; {"case", "ended": true, "exit": code}
  {"cmd": "quit"}
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
import traceback
from typing import Any

from pdctl.procexit import die_with_parent
from pdctl.sglang_stack import runtime
from pdctl.sglang_stack.side import Side
from pdctl.sglang_stack.spec import SideSpec

MARK = "@@"


def reply(doc: dict[str, Any]) -> None:
    sys.stdout.write(MARK + json.dumps(doc) + "\n")
    sys.stdout.flush()


def read_line(fd: int = 0) -> dict[str, Any] | None:
    """One command from FD, read unbuffered (a buffered reader could swallow the next process's command);
    None at EOF. Lines that are not JSON are skipped."""
    while True:
        buf = bytearray()
        while True:
            chunk = os.read(fd, 1)
            if not chunk:
                return None
            if chunk == b"\n":
                break
            buf += chunk
        try:
            return json.loads(buf.decode("utf-8", "replace"))
        except ValueError:
            continue


class Aborted(Exception):
    """The pdctl side asked to stop waiting (the other side already failed)."""


def run_case(first: dict[str, Any]) -> None:
    """The child: set up the case FIRST names, then serve transfers until "end" or EOF; never returns."""
    die_with_parent()
    runtime.FAILURES.install()
    case = first.get("case")
    commands: queue.Queue[dict[str, Any] | None] = queue.Queue()
    abort = threading.Event()

    def read() -> None:
        while True:
            msg = read_line()
            if msg is None or msg.get("cmd") in ("end", "quit"):
                commands.put(None)
                return  # stop reading: the parent reads the next command
            if msg.get("cmd") == "abort":
                abort.set()
            else:
                commands.put(msg)

    def check() -> None:
        if abort.is_set():
            raise Aborted()

    try:
        side = Side(SideSpec.from_dict(first["spec"]))
        reply({"case": case, "ok": True} | side.setup())
    except Exception as exc:  # noqa: BLE001 - every failure is an answer (StackFailure carries a stage)
        reply(_failure(case, exc))
        side = None
    threading.Thread(target=read, name="driver-stdin", daemon=True).start()
    while (msg := commands.get()) is not None:
        try:
            if msg.get("cmd") != "transfer" or side is None:
                reply({"case": case, "ok": False, "stage": None, "error": f"unexpected command {msg.get('cmd')!r}"})
                continue
            abort.clear()
            reply({"case": case} | side.transfer(int(msg["room"]), check))
        except Aborted:
            reply({"case": case, "ok": False, "stage": None, "error": "aborted: the other side failed",
                   "aborted": True})
        except Exception as exc:  # noqa: BLE001
            reply(_failure(case, exc))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _failure(case: Any, exc: BaseException) -> dict[str, Any]:
    return {"case": case, "ok": False, "stage": getattr(exc, "stage", None),
            "error": getattr(exc, "message", None) or f"{type(exc).__name__}: {exc}",
            "traceback": traceback.format_exc()[-4000:]}


def main() -> None:
    die_with_parent()
    timeout = float(os.environ.get("PDCTL_SGLANG_TIMEOUT", "60"))
    runtime.prepare_env(os.environ.get("SGLANG_HOST_IP", "127.0.0.1"), timeout)
    runtime.quiet_logging()
    t0 = time.monotonic()
    try:
        version = runtime.sglang_version()
        runtime.preload()
        import torch
    except Exception as exc:  # noqa: BLE001 - reported to pdctl, which names the interpreter
        reply({"ready": False, "error": f"{type(exc).__name__}: {exc}"})
        os._exit(1)
    reply({"ready": True, "sglang": version, "python": sys.executable, "import_s": time.monotonic() - t0,
           "cuda": bool(torch.cuda.is_available()), "threads": threading.active_count()})
    while (msg := read_line()) is not None and msg.get("cmd") != "quit":
        if msg.get("cmd") == "end":  # this side never started the case (the other side's setup failed)
            reply({"case": msg.get("case"), "ended": True, "exit": None, "ok": True})
            continue
        if msg.get("cmd") != "setup":
            if msg.get("cmd") != "abort":  # a late abort for a case already gone: nothing to stop
                reply({"case": msg.get("case"), "ok": False, "stage": None,
                       "error": f"no case is running for {msg.get('cmd')!r}"})
            continue
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            try:
                run_case(msg)
            finally:
                os._exit(1)
        _, status = os.waitpid(pid, 0)
        code = os.waitstatus_to_exitcode(status)
        reply({"case": msg.get("case"), "ended": True, "exit": code, "ok": code == 0,
               "error": None if code == 0 else f"the case's process ended with {code} (a negative number is "
                                                "the signal that killed it)"})
    sys.stdout.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
