"""NIXL backend (UCX over host memory): one agent per rank, WRITE transfers with notifications.

Why these settings: the agent is used from several threads (the engine's transfer worker writes while a
receiver thread polls notifications), so it runs with NIXL_THREAD_SYNC_STRICT, as SGLang's NIXL connector
does. UCX's default transport selection works for cross-process DRAM transfers on one host (tcp/lo for RMA,
CMA for active messages); `UCX_TLS=tcp UCX_NET_DEVICES=lo` also works but measured ~2x slower here, so the
environment is left as the user set it.

No NIXL progress thread (`enable_prog_thread=False`): NIXL 1.5.1's Python API starts it with a poll delay of
0, so every agent spins a native thread at 100% of a core even when nothing moves (an idle PD pair burnt two
of this machine's two cores). Without it, UCX progresses inside the calls that need progress — the writer's
`wait()` (check_xfer_state) and the receiver's `poll()` (get_new_notifs) — which both sides already call in a
loop while a transfer is in flight, so transfers lose no latency (benchmarks/bench_idle.py measures both).
`PDCTL_NIXL_PROGRESS_THREAD=1` turns the thread back on (the benchmark's "before").
"""

from __future__ import annotations

import base64
import time
import uuid
from typing import Any

import numpy as np

from pdctl.transfer.backends.base import Notification, TransferError

PROGRESS_THREAD_ENV = "PDCTL_NIXL_PROGRESS_THREAD"


def progress_thread_enabled() -> bool:
    """Whether agents start NIXL's own (spinning) progress thread: off unless PDCTL_NIXL_PROGRESS_THREAD=1."""
    import os

    return os.environ.get(PROGRESS_THREAD_ENV, "") not in ("", "0")


def _import_nixl() -> Any:
    """Import NIXL's Python API from `nixl` (the meta package) or directly from `nixl_cu12`."""
    try:
        from nixl import _api  # type: ignore[import-not-found]
    except ImportError:
        try:
            from nixl_cu12 import _api  # type: ignore[import-not-found,no-redef]
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise TransferError(f"NIXL is not installed (pip install nixl-cu12): {exc}") from exc
    _quiet_nixl_logger()
    return _api


def _quiet_nixl_logger() -> None:
    """NIXL logs INFO lines to stdout, which would corrupt `--json -` output: WARNING+, to stderr."""
    import logging
    import os
    import sys

    logger = logging.getLogger("nixl")
    if not os.environ.get("NIXL_LOG_LEVEL"):
        logger.setLevel(logging.WARNING)
    for handler in logger.handlers:
        if isinstance(handler, logging.StreamHandler) and getattr(handler, "stream", None) is sys.stdout:
            handler.setStream(sys.stderr)


class NixlBackend:
    """A NIXL agent with the UCX backend, registering DRAM regions."""

    kind = "nixl"

    def __init__(self, name: str, *, host: str = "127.0.0.1") -> None:
        api = _import_nixl()
        self._api = api
        self.name = f"{name}-{uuid.uuid4().hex[:8]}"
        config = api.nixl_agent_config(
            enable_prog_thread=progress_thread_enabled(),
            backends=["UCX"],
            sync_mode=api.nixl_thread_sync_t.NIXL_THREAD_SYNC_STRICT,
        )
        try:
            self.agent = api.nixl_agent(self.name, config)
        except Exception as exc:  # library errors carry no useful type
            raise TransferError(f"NIXL agent creation failed: {exc}") from exc
        if "UCX" not in self.agent.backends:
            raise TransferError("NIXL's UCX plugin is not available")
        self._regs: list[Any] = []
        self._peers: set[str] = set()

    def register(self, regions: list[tuple[int, int]]) -> dict[str, Any]:
        """Register (address, length) host regions with UCX; returns the (updated) metadata."""
        if not regions:
            return self.metadata()
        descs = [(int(addr), int(length), 0, "") for addr, length in regions]
        try:
            self._regs.append(self.agent.register_memory(descs, "DRAM"))
        except Exception as exc:
            raise TransferError(f"NIXL memory registration failed: {exc}") from exc
        return self.metadata()

    def metadata(self) -> dict[str, Any]:
        """The agent's serialized metadata (base64), which a writer loads with add_remote_agent."""
        raw = self.agent.get_agent_metadata()
        return {"kind": self.kind, "name": self.name, "agent_metadata": base64.b64encode(raw).decode()}

    def connect(self, peer: dict[str, Any]) -> str:
        """Load a peer agent's metadata (idempotent per peer name)."""
        name = str(peer["name"])
        if name in self._peers:
            return name
        try:
            loaded = self.agent.add_remote_agent(base64.b64decode(peer["agent_metadata"]))
        except Exception as exc:
            raise TransferError(f"NIXL could not load peer agent {name}: {exc}") from exc
        loaded = loaded.decode() if isinstance(loaded, bytes) else str(loaded)
        self._peers.add(loaded)
        return loaded

    def write(
        self, peer: str, src: np.ndarray, dst: np.ndarray, lengths: np.ndarray, notify: bytes | None = None
    ) -> Any:
        """Post one WRITE of all descriptors; NIXL sends `notify` to the peer once the data has landed."""
        n = int(np.asarray(src).size)
        if n == 0:
            if notify is not None:
                self.notify(peer, notify)
            return None
        lengths = np.asarray(lengths, dtype=np.uint64)
        zeros = np.zeros(n, dtype=np.uint64)
        src_reqs = np.column_stack((np.asarray(src, dtype=np.uint64), lengths, zeros))
        dst_reqs = np.column_stack((np.asarray(dst, dtype=np.uint64), lengths, zeros))
        try:
            src_descs = self.agent.get_xfer_descs(src_reqs, "DRAM")
            dst_descs = self.agent.get_xfer_descs(dst_reqs, "DRAM")
            handle = self.agent.initialize_xfer("WRITE", src_descs, dst_descs, peer, notify or b"")
            state = self.agent.transfer(handle)
        except Exception as exc:
            raise TransferError(f"NIXL transfer to {peer} failed to start: {exc}") from exc
        if state == "ERR":
            self.agent.release_xfer_handle(handle)
            raise TransferError(f"NIXL transfer to {peer} failed to post")
        return handle

    def wait(self, handle: Any, timeout: float) -> None:
        """Poll the transfer state until DONE; ERR or the deadline raises TransferError."""
        if handle is None:
            return
        deadline = time.monotonic() + timeout
        spins = 0
        try:
            while True:
                try:
                    state = self.agent.check_xfer_state(handle)
                except Exception as exc:
                    raise TransferError(f"NIXL transfer failed: {exc}") from exc
                if state == "DONE":
                    return
                if state == "ERR":
                    raise TransferError("NIXL transfer failed (peer unreachable or memory not registered)")
                if time.monotonic() > deadline:
                    raise TransferError(f"NIXL transfer did not complete within {timeout:.1f}s")
                spins += 1
                if spins > 200:
                    time.sleep(0.0005)
        finally:
            try:
                self.agent.release_xfer_handle(handle)
            except Exception:  # noqa: BLE001, S110 - releasing a failed request may fail too
                pass

    def notify(self, peer: str, message: bytes) -> None:
        """Send a data-less notification to a connected peer."""
        try:
            self.agent.send_notif(peer, message)
        except Exception as exc:
            raise TransferError(f"NIXL notification to {peer} failed: {exc}") from exc

    def poll(self) -> list[Notification]:
        """Notifications received since the last call."""
        out: list[Notification] = []
        for sender, messages in self.agent.get_new_notifs().items():
            for msg in messages:
                out.append(Notification(sender=str(sender), message=bytes(msg)))
        return out

    def close(self) -> None:
        """Deregister memory and forget peers; the agent itself is freed with the object."""
        for peer in list(self._peers):
            try:
                self.agent.remove_remote_agent(peer)
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self._peers.clear()
        for reg in self._regs:
            try:
                self.agent.deregister_memory(reg)
            except Exception:  # noqa: BLE001, S110 - closing is best effort
                pass
        self._regs.clear()
