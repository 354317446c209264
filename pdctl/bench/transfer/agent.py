"""Preflight's transfer agent (`python -m pdctl.bench.transfer.agent BACKEND`): one process per node for a whole
preflight, serving every transfer pair that node takes part in, as the prefill side or the decode side.

Why one per node: starting Python, numpy and the transfer library (NIXL/UCX, Mooncake) costs seconds of CPU;
a process per pair made that cost grow with the pairs (P x D). The agent pays it once, at start; a pair then
costs its transfer. Preflight (pdctl.preflight.transfer) starts it through the node's executor (ssh, srun,
docker) and routes the pairs' protocol lines between agents; the KV itself flows between the two nodes over the
backend under test. A pair's two sides are bench-transfer's (pdctl.bench.transfer.run / .peer), unchanged.

Protocol (one JSON document per line):
- stdout: `@ready {"pid", "hostname", "backend"}` once the library is imported; `@>{"pair": K, "to": side,
  "msg": ...}` a message of pair K for its other side; `@={"pair": K, "result": ...}` pair K's result (from
  its prefill side). Libraries' own lines are ignored.
- stdin: `{"cmd": "prefill", "pair": K, "config": BenchConfig}` runs the bench's prefill side of pair K;
  `{"cmd": "decode", "pair": K}` opens pair K's decode side; `{"cmd": "relay", "pair": K, "to": side, "msg":
  ...}` is a message from pair K's other side. EOF: the agent ends.
- stderr: `@@begin K` / `@@end K` around a pair's prefill side (written on fd 2, in order with what the
  transfer library prints there), so preflight reads the path each pair took from that pair's lines alone.
"""

from __future__ import annotations

import json
import os
import queue
import socket
import sys
import threading
from dataclasses import fields
from typing import Any

from pdctl.bench.transfer.peer import DecodeSide, next_answer
from pdctl.bench.transfer.run import PEER_SLACK_S, run_bench
from pdctl.errors import PdctlError
from pdctl.plan.request import BenchConfig
from pdctl.preflight.wire import BEGIN, END, READY, RESULT, TO_PEER
from pdctl.procexit import die_with_parent
from pdctl.transfer.backends.factory import load_backend

_out = threading.Lock()


def emit(prefix: str, doc: dict[str, Any]) -> None:
    """One protocol line on stdout (threads of several pairs share it)."""
    with _out:
        sys.stdout.write(prefix + json.dumps(doc) + "\n")
        sys.stdout.flush()


def mark(text: str) -> None:
    """A marker line on fd 2, ordered with the transfer library's own writes there."""
    sys.stderr.flush()
    os.write(2, (text + "\n").encode())


class SessionPeer:
    """The decode side of pair K as run_bench sees it: messages go out for it, its answers come relayed in."""

    def __init__(self, pair: str, timeout: float) -> None:
        self.pair, self.timeout = pair, timeout
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()

    def send(self, doc: dict[str, Any]) -> None:
        emit(TO_PEER, {"pair": self.pair, "to": "decode", "msg": doc})

    def recv(self) -> dict[str, Any]:
        return next_answer(self.inbox, self.timeout, lambda: "decode side of the bench is gone (its agent ended)")

    def exit_note(self) -> str:
        return ""

    def close(self) -> None:
        self.send({"cmd": "quit"})


def _prefill(pair: str, raw: dict[str, Any], peer: SessionPeer) -> None:
    mark(BEGIN + pair)
    try:
        names = {f.name for f in fields(BenchConfig)}
        cfg = BenchConfig(**{k: v for k, v in raw.items() if k in names})
        doc: dict[str, Any] = run_bench(cfg, peer=peer, tag=f"-{pair}")
    except PdctlError as exc:
        doc = {"error": exc.message}
    except Exception as exc:  # noqa: BLE001 - reported to preflight, which names the node
        doc = {"error": f"{type(exc).__name__}: {exc}"}
    mark(END + pair)
    emit(RESULT, {"pair": pair, "result": doc})


def _decode(pair: str, inbox: queue.Queue[dict[str, Any] | None]) -> None:
    def reply(doc: dict[str, Any]) -> None:
        emit(TO_PEER, {"pair": pair, "to": "prefill", "msg": doc})

    side: DecodeSide | None = None
    while (msg := inbox.get()) is not None and msg.get("cmd") != "quit":
        try:
            if msg["cmd"] == "setup":
                side = DecodeSide(msg, reply=reply)
                reply(side.describe())
            elif msg["cmd"] == "run" and side is not None:
                reply(side.run(msg["path"], int(msg["expect"]), float(msg["timeout"])))
        except Exception as exc:  # noqa: BLE001 - reported to the prefill side, which fails the pair
            reply({"error": f"{type(exc).__name__}: {exc}"})
    if side is not None:
        for backend in side.backends:
            backend.close()


def serve(backend: str) -> int:
    """Import the library once, say ready, then serve pairs until EOF on stdin. A node in both roles of a
    pair (prefill and decode on one node) serves both sides: inboxes are keyed by (side, pair)."""
    load_backend(backend)
    emit(READY, {"pid": os.getpid(), "hostname": socket.gethostname(), "backend": backend})
    inboxes: dict[tuple[str, str], queue.Queue[dict[str, Any] | None]] = {}
    threads: list[threading.Thread] = []
    for line in sys.stdin:
        try:
            msg = json.loads(line)
            cmd, pair = msg["cmd"], str(msg["pair"])
        except (ValueError, KeyError, TypeError):
            continue
        if cmd == "relay" and (msg.get("to"), pair) in inboxes:
            inboxes[(msg["to"], pair)].put(msg.get("msg"))
        elif cmd == "prefill":
            peer = SessionPeer(pair, float(msg["config"].get("timeout", 120)) + PEER_SLACK_S)
            inboxes[("prefill", pair)] = peer.inbox
            threads.append(threading.Thread(target=_prefill, args=(pair, msg["config"], peer), daemon=True))
            threads[-1].start()
        elif cmd == "decode":
            inboxes[("decode", pair)] = queue.Queue()
            threads.append(threading.Thread(target=_decode, args=(pair, inboxes[("decode", pair)]), daemon=True))
            threads[-1].start()
    for inbox in inboxes.values():
        inbox.put(None)
    for thread in threads:
        thread.join(timeout=30)
    return 0


def main() -> int:
    die_with_parent()
    return serve(sys.argv[1] if len(sys.argv) > 1 else "nixl")


if __name__ == "__main__":
    from pdctl.procexit import run_and_exit

    run_and_exit(main)
