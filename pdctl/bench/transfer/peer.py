"""The decode side of `pdctl bench-transfer`, run as its own process (`python -m pdctl.bench.transfer.peer`).

It owns the decode ranks' pools (one backend endpoint per rank, as SGLang has one per GPU), waits for the
prefill side's notifications, scatters packed data, and checks every byte against the seeded global KV.
Protocol: one JSON object per line on stdin; replies are stdout lines prefixed with "@@" (libraries may
print their own lines). `PeerProcess` is the driver's end of it, kept here so both ends live together.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any

import numpy as np

from pdctl.bench.transfer.packed import chunk_ranges, scatter, shape_pair_layout
from pdctl.bench.transfer.rankmem import KVShape, RankMemory, global_kv
from pdctl.errors import CheckFailed
from pdctl.plan import prefill_peers
from pdctl.procexit import die_with_parent
from pdctl.transfer.backends import create_backend


def reply(doc: dict[str, Any]) -> None:
    """Send one protocol line."""
    sys.stdout.write("@@" + json.dumps(doc) + "\n")
    sys.stdout.flush()


class PeerProcess:
    """The driver's handle on this module run as a child process (`bench-transfer`'s decode side).

    A reader thread drains the child's stdout (libraries print there too, and a full pipe would block the
    child), so every answer is waited for with a deadline: a hung child fails the bench, never hangs it.
    """

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "pdctl.bench.transfer.peer"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read, name="bench-peer-reader", daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            if line.startswith("@@"):
                self._answers.put(line[2:])
        self._answers.put(None)  # EOF: the child is gone

    def send(self, doc: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(doc) + "\n")
        self.proc.stdin.flush()

    def recv(self) -> dict[str, Any]:
        try:
            line = self._answers.get(timeout=self.timeout)
        except queue.Empty:
            raise CheckFailed(f"decode side of the bench did not answer within {self.timeout:g}s") from None
        if line is None:
            try:
                code: int | None = self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                code = None
            raise CheckFailed(f"decode side of the bench exited (code {code})")
        doc = json.loads(line)
        if "error" in doc:
            raise CheckFailed(f"decode side of the bench failed: {doc['error']}")
        return doc

    def exit_note(self) -> str:
        """'' while the child runs; else '; decode side of the bench exited (code N)' (why a transfer failed)."""
        code = self.proc.poll()
        return "" if code is None else f"; decode side of the bench exited (code {code})"

    def close(self) -> None:
        try:
            self.send({"cmd": "quit"})
            self.proc.wait(timeout=10)
        except Exception:  # noqa: BLE001, S110 - the peer may be gone already; killed below
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait(timeout=10)


class DecodeSide:
    """Decode ranks' memory, endpoints and per-pair packed layouts."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.shape = KVShape(**cfg["shape"])
        self.p_tp, self.d_tp = int(cfg["prefill_tp"]), int(cfg["decode_tp"])
        full, swa = global_kv(self.shape, int(cfg["seed"]))
        self.kv = {"full": full, "swa": swa}
        self.ranks = [RankMemory(self.shape, self.d_tp, d) for d in range(self.d_tp)]
        host = str(cfg.get("host") or "127.0.0.1")
        self.backends = [create_backend(cfg["backend"], f"bench-decode{d}", host=host) for d in range(self.d_tp)]
        self.layouts: dict[tuple[int, int], Any] = {}
        self.staging: dict[tuple[int, int], np.ndarray] = {}
        layers = self.shape.pool_layers()
        for d, mem in enumerate(self.ranks):
            self.backends[d].register(mem.regions())
            for p in prefill_peers(self.p_tp, self.d_tp, d):
                pages = {name: mem.page_ids(name) for name in layers}
                layout = shape_pair_layout(self.shape, pages, src_tp=self.p_tp, dst_tp=self.d_tp, src_rank=p,
                                           dst_rank=d)
                self.layouts[(p, d)] = layout
                if layout.scatter:
                    buf = np.zeros(layout.nbytes, dtype=np.uint8)
                    self.backends[d].register([(int(buf.ctypes.data), int(buf.nbytes))])
                    self.staging[(p, d)] = buf

    def describe(self) -> dict[str, Any]:
        """What the prefill side needs: per rank the endpoint metadata, pool pointers and staging addresses."""
        out = []
        for d, mem in enumerate(self.ranks):
            pools = {
                name: {"ptrs": mem.kv_ptrs(pool), "item_lens": mem.item_lens(pool)}
                for name, pool in mem.pools().items()
            }
            staging = {f"{p}": int(buf.ctypes.data) for (p, dd), buf in self.staging.items() if dd == d}
            out.append({"metadata": self.backends[d].metadata(), "pools": pools, "staging": staging})
        return {"ranks": out}

    def run(self, path: str, expect: int, timeout: float) -> dict[str, Any]:
        """Clear, report armed, collect `expect` notifications (scatter packed pairs), verify."""
        for mem in self.ranks:
            mem.clear()
        for buf in self.staging.values():
            buf.fill(0)
        reply({"armed": True})
        deadline = time.monotonic() + timeout
        seen: set[tuple[int, int, int]] = set()
        scatter_s = 0.0
        errors: list[str] = []
        while len(seen) < expect and time.monotonic() < deadline:
            got = False
            for d, backend in enumerate(self.backends):
                for note in backend.poll():
                    got = True
                    parts = note.message.decode().split()
                    if len(parts) < 3 or parts[0] != "done" or parts[1] != path:
                        continue
                    pair = (int(parts[2]), d)
                    chunk = int(parts[3]) if len(parts) > 3 else -1
                    if path == "packed" and self.layouts[pair].scatter:
                        layout = self.layouts[pair]
                        only = chunk_ranges(len(layout.segments))[chunk] if chunk >= 0 else None
                        t = time.monotonic()
                        scatter(
                            layout,
                            self.ranks[d].pools(),
                            self.staging[pair],
                            self.shape.page_size,
                            self.shape.head_bytes,
                            only,
                        )
                        scatter_s += time.monotonic() - t
                    seen.add((*pair, chunk))
            if not got:
                time.sleep(0.001)  # tighter polling starves UCX progress on 2 shared cores
        done_at = time.monotonic()
        if len(seen) < expect:
            errors.append(f"only {len(seen)} of {expect} notifications within {timeout:.0f}s")
        bad = sum(mem.mismatched_bytes(self.kv) for mem in self.ranks)
        return {"done_at": done_at, "scatter_s": scatter_s, "mismatched_bytes": bad, "errors": errors}


def main() -> int:
    """Serve the bench protocol until "quit" or EOF (or the driver's death: no orphan keeps working)."""
    die_with_parent()
    side: DecodeSide | None = None
    for line in sys.stdin:
        msg = json.loads(line)
        try:
            if msg["cmd"] == "setup":
                side = DecodeSide(msg)
                reply(side.describe())
            elif msg["cmd"] == "run":
                assert side is not None
                reply(side.run(msg["path"], int(msg["expect"]), float(msg["timeout"])))
            elif msg["cmd"] == "quit":
                break
        except Exception as exc:  # noqa: BLE001 - report to the driver instead of dying silently
            reply({"error": f"{type(exc).__name__}: {exc}"})
    if side is not None:
        for backend in side.backends:
            backend.close()
    return 0


if __name__ == "__main__":
    from pdctl.procexit import run_and_exit

    run_and_exit(main)
