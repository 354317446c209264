"""pdctl's end of a driver running in SGLang's interpreter: which interpreter, its environment, the process.

Runs in pdctl's interpreter (standard library only). SGLang's interpreter is a separate Python environment
(its pins — CUDA torch, its own numpy — must not be pdctl's): `PDCTL_SGLANG_PYTHON`, else ./.venv-sglang or
the checkout's .venv-sglang (`make sglang-env`), else this interpreter; on a node, the topology's
`engine.python`. pdctl itself is put on the driver's PYTHONPATH (the driver imports pdctl.plan, which is
pure Python), so the side environment needs no pdctl install — only the transfer libraries the backend
needs (nixl / mooncake, see scripts/sglang-env/requirements.txt).
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.transfer.registry import UCX_PATH_ENV

ENV_VAR = "PDCTL_SGLANG_PYTHON"
PDCTL_ROOT = str(Path(__file__).resolve().parents[2])  # the folder that holds the pdctl package
PROBE = ("import importlib.metadata as m, importlib.util as u, json; "
         "print(json.dumps({'sglang': m.version('sglang') if u.find_spec('sglang') else None, "
         "'nixl': bool(u.find_spec('nixl')), 'mooncake': bool(u.find_spec('mooncake'))}))")


class StackUnavailable(RuntimeError):
    """No interpreter with SGLang (and the backend's library) was found; the message says what was tried."""


@dataclass(frozen=True)
class Interpreter:
    """A Python with SGLang importable, its SGLang release, and which transfer libraries it has."""

    python: str
    sglang: str
    nixl: bool
    mooncake: bool

    def has_backend(self, backend: str) -> bool:
        return bool(getattr(self, backend, False))


def probe(python: str, timeout: float = 120.0) -> Interpreter | str:
    """What PYTHON has, or why it is not usable (a short reason)."""
    if not Path(python).exists():
        return "missing"
    try:
        out = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return type(exc).__name__
    try:
        doc = json.loads(out.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return f"probe failed (exit {out.returncode})"
    if not doc.get("sglang"):
        return "no sglang"
    return Interpreter(os.path.abspath(python), str(doc["sglang"]), bool(doc["nixl"]), bool(doc["mooncake"]))


def candidates(explicit: str | None = None) -> list[str]:
    checkout = str(Path(PDCTL_ROOT) / ".venv-sglang" / "bin" / "python")
    found = [explicit] if explicit else [os.environ.get(ENV_VAR), ".venv-sglang/bin/python", checkout, sys.executable]
    return list(dict.fromkeys(c for c in found if c))


def local_python() -> str:
    """SGLang's interpreter on this machine without asking it anything (a render must stay cheap and
    deterministic): $PDCTL_SGLANG_PYTHON, else the first existing ./.venv-sglang or checkout .venv-sglang,
    else the checkout's path (the process start then names it)."""
    found = [c for c in candidates() if c != sys.executable]
    for python in found:
        if Path(python).exists():
            return os.path.abspath(python)
    return str(Path(PDCTL_ROOT) / ".venv-sglang" / "bin" / "python")


def pythonpath(existing: str | None = None) -> str:
    """PYTHONPATH that makes this pdctl importable by another interpreter (EXISTING entries kept after it)."""
    return PDCTL_ROOT + (os.pathsep + existing if existing else "")


def find_interpreter(backend: str, version: str | None = None, explicit: str | None = None) -> Interpreter:
    """The first candidate with SGLang (VERSION when given) and BACKEND's library; StackUnavailable else."""
    tried = []
    for python in candidates(explicit):
        got = probe(python)
        if isinstance(got, str):
            tried.append(f"{python} ({got})")
        elif version and got.sglang != version:
            tried.append(f"{python} (sglang {got.sglang}, the topology names {version})")
        elif not got.has_backend(backend):
            tried.append(f"{python} (sglang {got.sglang}, no {backend} module)")
        else:
            return got
    raise StackUnavailable("no Python with SGLang's transfer stack was found: " + "; ".join(tried))


def driver_env(host: str, timeout: float, extra: dict[str, str] | None = None) -> dict[str, str]:
    """What a driver's environment adds (to this process's, or a node's): pdctl importable, SGLang's address
    and timeouts, UCX's path tables (last: what carried the bytes must be learnt even if EXTRA silences it)."""
    return {**(extra or {}), **UCX_PATH_ENV, "PYTHONPATH": pythonpath(os.environ.get("PYTHONPATH")),
            "SGLANG_HOST_IP": host, "PDCTL_SGLANG_TIMEOUT": str(timeout), "PYTHONUNBUFFERED": "1"}


class DriverProcess:
    """One driver (`pdctl.sglang_stack.driver`) and a deadline on every answer.

    A reader thread drains stdout (libraries print there too; a full pipe would block the driver); stderr
    goes to a file, read afterwards for which transport carried the bytes and for failure tails.
    """

    def __init__(self, python: str, role: str, env: dict[str, str], argv: list[str] | None = None,
                 popen: Any = None) -> None:
        self.role = role
        self.log = tempfile.NamedTemporaryFile(  # noqa: SIM115 - lives as long as the driver; removed in close()
            prefix=f"pdctl-sglang-{role}-", suffix=".log", delete=False)
        cmd = argv or [python, "-m", "pdctl.sglang_stack.driver"]
        if popen is not None:  # a node's executor (preflight): it owns the process
            self.proc = popen(cmd, env=env)
            self._stderr_thread = threading.Thread(target=self._copy_stderr, daemon=True)
            self._stderr_thread.start()
        else:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                         text=True, env={**os.environ, **env}, start_new_session=True)
        self._answers: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, name=f"sglang-{role}-reader", daemon=True).start()

    def _copy_stderr(self) -> None:
        for line in self.proc.stderr:
            self.log.write(line.encode("utf-8", "replace"))
            self.log.flush()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@"):
                try:
                    self._answers.put(json.loads(line[2:]))
                except ValueError:
                    continue
        self._answers.put(None)

    def send(self, doc: dict[str, Any]) -> None:
        try:
            assert self.proc.stdin is not None
            self.proc.stdin.write(json.dumps(doc) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            pass  # the driver is gone; recv() says so

    def try_recv(self, wait: float) -> dict[str, Any] | None:
        """The next answer if one comes within WAIT seconds, else None (the driver being gone is an answer)."""
        try:
            doc = self._answers.get(timeout=wait)
        except queue.Empty:
            return None
        if doc is None:
            self._answers.put(None)  # keep saying so
            return {"ok": False, "error": f"SGLang {self.role} driver exited (code {self.proc.poll()}): "
                                          f"{self.tail()}", "exited": True}
        return doc

    def recv(self, timeout: float) -> dict[str, Any]:
        """The next answer; {"ok": false, "error": ...} when the driver is gone or silent past TIMEOUT."""
        try:
            doc = self._answers.get(timeout=timeout)
        except queue.Empty:
            return {"ok": False, "error": f"SGLang {self.role} driver did not answer within {timeout:g}s",
                    "timeout": True}
        if doc is None:
            return {"ok": False, "error": f"SGLang {self.role} driver exited (code {self.proc.poll()}): "
                                          f"{self.tail()}", "exited": True}
        return doc

    def stderr_text(self) -> str:
        self.log.flush()
        try:
            return Path(self.log.name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def tail(self, chars: int = 1500) -> str:
        return self.stderr_text().strip()[-chars:]

    def close(self) -> None:
        self.send({"cmd": "quit"})
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                self.proc.kill()
            self.proc.wait(timeout=15)
        try:
            os.unlink(self.log.name)
        except OSError:
            pass
