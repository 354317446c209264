"""bench-transfer's prefill side as a process of its own (`python -m pdctl.bench.transfer.remote`), for a
transfer between two machines: preflight starts it on a prefill node and the decode side
(`python -m pdctl.bench.transfer.peer`) on a decode node, each through the node's executor, and relays the
protocol between them (pdctl.preflight.transfer). Neither node needs to reach the machine running pdctl;
only the KV itself flows between the two nodes, over the backend under test.

Protocol on this process's stdio:
- stdin, first line: the BenchConfig as JSON; then the decode peer's replies, `@@<json>` lines (relayed);
- stdout: `@><json>` = a message for the decode peer, `@=<json>` = the result document (or {"error": ...});
  every other line (libraries' output) is ignored by the relay, which collects stderr for the path report.
"""

from __future__ import annotations

import json
import queue
import sys
import threading
from dataclasses import fields
from typing import Any

from pdctl.errors import CheckFailed, PdctlError
from pdctl.plan.request import BenchConfig

TO_PEER = "@>"
FROM_PEER = "@@"
RESULT = "@="


class StdioPeer:
    """The decode peer as run_bench sees it, reached through this process's stdin/stdout (relayed)."""

    def __init__(self, timeout: float, lines: queue.Queue[str | None]) -> None:
        self.timeout = timeout
        self.lines = lines

    def send(self, doc: dict[str, Any]) -> None:
        sys.stdout.write(TO_PEER + json.dumps(doc) + "\n")
        sys.stdout.flush()

    def recv(self) -> dict[str, Any]:
        try:
            line = self.lines.get(timeout=self.timeout)
        except queue.Empty:
            raise CheckFailed(f"decode side of the bench did not answer within {self.timeout:g}s") from None
        if line is None:
            raise CheckFailed("decode side of the bench is gone (its relay closed)")
        doc = json.loads(line)
        if "error" in doc:
            raise CheckFailed(f"decode side of the bench failed: {doc['error']}")
        return doc

    def exit_note(self) -> str:
        return ""

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
        except (BrokenPipeError, ValueError):
            pass


def _reader(lines: queue.Queue[str | None]) -> None:
    for line in sys.stdin:
        if line.startswith(FROM_PEER):
            lines.put(line[len(FROM_PEER):])
    lines.put(None)


def main() -> int:
    from pdctl.bench.transfer.run import PEER_SLACK_S, run_bench

    first = sys.stdin.readline()
    try:
        raw = json.loads(first)
        names = {f.name for f in fields(BenchConfig)}
        cfg = BenchConfig(**{k: v for k, v in raw.items() if k in names})
    except (ValueError, TypeError) as exc:
        sys.stdout.write(RESULT + json.dumps({"error": f"bad bench config: {exc}"}) + "\n")
        return 2
    lines: queue.Queue[str | None] = queue.Queue()
    threading.Thread(target=_reader, args=(lines,), name="bench-relay-reader", daemon=True).start()
    try:
        doc: dict[str, Any] = run_bench(cfg, peer=StdioPeer(cfg.timeout + PEER_SLACK_S, lines))
    except PdctlError as exc:
        doc = {"error": exc.message}
    except Exception as exc:  # noqa: BLE001 - reported to the relay, which names the node
        doc = {"error": f"{type(exc).__name__}: {exc}"}
    sys.stdout.write(RESULT + json.dumps(doc) + "\n")
    sys.stdout.flush()
    return 0 if "error" not in doc else 1


if __name__ == "__main__":
    from pdctl.procexit import run_and_exit

    run_and_exit(main)
