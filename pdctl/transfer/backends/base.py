"""The one small protocol every KV transfer backend implements (no process-exit policy lives here).

Why a protocol: the PD roles and `pdctl bench-transfer` move bytes the same way whatever the library is
(SGLang supports several), so the block lists built by `pdctl.plan` are handed to a backend that only knows
how to register memory, learn a peer, WRITE (src, dst, len) lists into the peer's memory and pass short
notification messages. Everything here is host (DRAM) memory: the reference engine runs on CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import numpy as np


class TransferError(RuntimeError):
    """A transfer could not be set up or did not complete (peer gone, timeout, library error)."""


@dataclass
class Notification:
    """A short message a peer sent along with (after) its writes; `sender` is the peer's backend name."""

    sender: str
    message: bytes


@runtime_checkable
class TransferBackend(Protocol):
    """What the sender/receiver and the bench need from a transfer library.

    Lifecycle: `register` the local regions once -> hand `metadata()` to the peer (JSON-able dict) ->
    the writing side calls `connect(peer_metadata)` -> `write(...)`/`wait(...)` as often as needed, the
    receiving side `poll()`s notifications -> `close()`.
    """

    kind: str  # "nixl" | "mooncake"
    name: str  # unique name of this endpoint (agent name / session id)

    def register(self, regions: list[tuple[int, int]]) -> dict[str, Any]:
        """Register host memory regions (address, length) so peers may write into them; returns metadata()."""

    def metadata(self) -> dict[str, Any]:
        """JSON-serialisable description a peer needs to write here and notify us."""

    def connect(self, peer: dict[str, Any]) -> str:
        """Learn a peer from its `metadata()`; returns the peer name used by `write`/`notify`."""

    def write(
        self, peer: str, src: np.ndarray, dst: np.ndarray, lengths: np.ndarray, notify: bytes | None = None
    ) -> Any:
        """Start writing local `src[i]` -> peer `dst[i]` of `lengths[i]` bytes; notify the peer after."""

    def wait(self, handle: Any, timeout: float) -> None:
        """Block until the write finished; raise TransferError on failure or after `timeout` seconds."""

    def notify(self, peer: str, message: bytes) -> None:
        """Send a notification without data (e.g. an error for a room)."""

    def poll(self) -> list[Notification]:
        """Notifications received since the last call (non-blocking)."""

    def close(self) -> None:
        """Release registrations and the library's resources."""


def flatten_blocks(
    blocks: list[tuple[np.ndarray, np.ndarray, int]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Turn pdctl.plan's per-entry (src_addrs, dst_addrs, block_len) list into three flat uint64 arrays."""
    if not blocks:
        empty = np.empty(0, dtype=np.uint64)
        return empty, empty.copy(), empty.copy()
    src = np.concatenate([np.asarray(b[0], dtype=np.uint64).ravel() for b in blocks])
    dst = np.concatenate([np.asarray(b[1], dtype=np.uint64).ravel() for b in blocks])
    lens = np.concatenate([np.full(np.asarray(b[0]).size, int(b[2]), dtype=np.uint64) for b in blocks])
    return src, dst, lens
