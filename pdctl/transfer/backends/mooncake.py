"""Mooncake backend (TransferEngine over TCP, P2PHANDSHAKE metadata): one engine per rank, host memory.

Why these settings: SGLang's `mooncake_tcp` mode initialises the engine with the "P2PHANDSHAKE" metadata
server (no etcd) and the "tcp" protocol; the session id a peer writes to is "host:rpc_port". Mooncake's TCP
transport rejects batches deeper than its per-peer queue (default 4096 on this build) with "TCP lane
queue-full rejection", so the queue limits are raised (65535 is the largest value it accepts) and large
batches are split into chunks below that.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pdctl.transfer.backends.base import Notification, TransferError

# Largest per-peer queue depth Mooncake accepts (65536 and above are ignored and the default kept).
_QUEUE_LIMIT = "65535"
_CHUNK = 32768  # descriptors per batch, well under the queue limit


def _configure_env() -> None:
    """Raise Mooncake's per-peer TCP queue limits before the first engine starts (user values win)."""
    os.environ.setdefault("MC_TCP_MAX_QUEUED_TRANSFERS_PER_PEER", _QUEUE_LIMIT)
    os.environ.setdefault("MC_TCP_MAX_PENDING_ADMISSIONS_PER_PEER", _QUEUE_LIMIT)


@dataclass
class _Write:
    """An in-flight write: the worker thread and its outcome."""

    thread: threading.Thread | None = None
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class MooncakeBackend:
    """A Mooncake TransferEngine endpoint reachable at host:rpc_port."""

    kind = "mooncake"

    def __init__(self, name: str, *, host: str = "127.0.0.1") -> None:
        _configure_env()
        try:
            from mooncake.engine import TransferEngine, TransferNotify, TransferOpcode  # type: ignore
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise TransferError(
                "Mooncake is not available (pip install mooncake-transfer-engine-non-cuda; "
                f"it needs the system library libibverbs1): {exc}"
            ) from exc
        self._notify_cls = TransferNotify
        self._write_op = TransferOpcode.Write
        self.engine = TransferEngine()
        rc = self.engine.initialize(host, "P2PHANDSHAKE", "tcp", "")
        if rc != 0:
            raise TransferError(f"Mooncake TransferEngine.initialize({host!r}, tcp) failed (rc={rc})")
        self.label = name
        self.name = f"{host}:{self.engine.get_rpc_port()}"
        self._regions: list[int] = []
        # Mooncake rejects an empty batch, so a data-less notification rides on a 1-byte write from our
        # pad to the peer's pad (both registered, addresses exchanged in the metadata).
        self._pad = np.zeros(64, dtype=np.uint8)
        self.register([(self._pad.ctypes.data, self._pad.nbytes)])
        self._peer_pads: dict[str, int] = {}

    def register(self, regions: list[tuple[int, int]]) -> dict[str, Any]:
        """Register (address, length) host regions with the engine; returns the metadata."""
        for addr, length in regions:
            rc = self.engine.register_memory(int(addr), int(length))
            if rc != 0:
                raise TransferError(f"Mooncake memory registration failed (rc={rc})")
            self._regions.append(int(addr))
        return self.metadata()

    def metadata(self) -> dict[str, Any]:
        """The session id ("host:port") peers write to; the engine handshakes the rest itself."""
        return {"kind": self.kind, "name": self.name, "pad": int(self._pad.ctypes.data)}

    def connect(self, peer: dict[str, Any]) -> str:
        """Mooncake connects lazily on the first transfer; the peer name is its session id."""
        name = str(peer["name"])
        self._peer_pads[name] = int(peer["pad"])
        return name

    def _run(
        self, job: _Write, peer: str, src: list[int], dst: list[int], lens: list[int], notify: bytes | None
    ) -> None:
        try:
            n = len(src)
            for start in range(0, n, _CHUNK):
                end = min(n, start + _CHUNK)
                if end == n and notify is not None:
                    note = self._notify_cls(self.name, notify.decode("latin-1"))
                    rc = self.engine.batch_transfer_sync(
                        peer, src[start:end], dst[start:end], lens[start:end], self._write_op, note
                    )
                else:
                    rc = self.engine.batch_transfer_sync_write(
                        peer, src[start:end], dst[start:end], lens[start:end]
                    )
                if rc != 0:
                    job.error = f"Mooncake transfer to {peer} failed (rc={rc})"
                    return
            if n == 0 and notify is not None:
                self.notify(peer, notify)
        except Exception as exc:  # noqa: BLE001 - the binding raises plain RuntimeErrors
            job.error = f"Mooncake transfer to {peer} failed: {exc}"
        finally:
            job.done.set()

    def write(
        self, peer: str, src: np.ndarray, dst: np.ndarray, lengths: np.ndarray, notify: bytes | None = None
    ) -> Any:
        """Write in a worker thread (the engine's batch calls block), so that `wait` can time out."""
        job = _Write()
        args = (
            np.asarray(src, dtype=np.uint64).tolist(),
            np.asarray(dst, dtype=np.uint64).tolist(),
            np.asarray(lengths, dtype=np.uint64).tolist(),
        )
        job.thread = threading.Thread(
            target=self._run, args=(job, peer, *args, notify), name="mooncake-write", daemon=True
        )
        job.thread.start()
        return job

    def wait(self, handle: Any, timeout: float) -> None:
        """Wait for the write's thread; its error or the deadline raises TransferError."""
        if handle is None:
            return
        if not handle.done.wait(timeout):
            raise TransferError(f"Mooncake transfer did not complete within {timeout:.1f}s")
        if handle.error:
            raise TransferError(handle.error)

    def notify(self, peer: str, message: bytes) -> None:
        """Send a notification riding on a 1-byte pad-to-pad write (peer must be `connect`ed)."""
        if peer not in self._peer_pads:
            raise TransferError(f"Mooncake peer {peer} is not connected")
        note = self._notify_cls(self.name, message.decode("latin-1"))
        src, dst = [int(self._pad.ctypes.data)], [self._peer_pads[peer]]
        try:
            rc = self.engine.batch_transfer_sync(peer, src, dst, [1], self._write_op, note)
        except Exception as exc:
            raise TransferError(f"Mooncake notification to {peer} failed: {exc}") from exc
        if rc != 0:
            raise TransferError(f"Mooncake notification to {peer} failed (rc={rc})")

    def poll(self) -> list[Notification]:
        """Notifications received since the last call."""
        return [
            Notification(sender=str(n.name), message=str(n.msg).encode("latin-1"))
            for n in self.engine.get_notifies()
        ]

    def close(self) -> None:
        """Unregister memory (the engine shuts down when garbage-collected)."""
        for addr in self._regions:
            try:
                self.engine.unregister_memory(addr)
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self._regions.clear()
