"""Pieces both PD roles share: the ServerInfo they exchange, pool descriptions, aux slots, backend setup.

Why in one place: the handshake is only meaningful if prefill and decode describe themselves with the same
keys and the same derivation (pools, layout, dtype), and register the same memory the model reads.
"""

from __future__ import annotations

import socket
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from pdctl.reference.kvcache import RankKV
from pdctl.reference.roles.base import FirstToken, RoleContext
from pdctl.reference.roles.sender import AUX_SLOT_BYTES
from pdctl.transfer.backends import TransferBackend, create_backend


@dataclass(frozen=True)
class PDFirstToken(FirstToken):
    """The first token as decode receives it, plus the prefill's prefix-cache hit (SGLang's aux data):
    the scheduler reports `cached_tokens` in decode's meta_info, as SGLang's decode does."""

    cached_tokens: int = 0


def server_info(ctx: RoleContext, role: str) -> dict[str, Any]:
    """This server's side of the handshake (SGLang's PrefillServerInfo / decode kv_args, as JSON)."""
    s = ctx.settings
    return {
        "role": role,
        "tp_size": ctx.tp,
        "pp_size": 1,
        "page_size": s.page_size,
        "kv_cache_dtype": s.kv_cache_dtype,
        "kv_layout": s.kv_layout,
        "hybrid_swa": bool(ctx.kv.hybrid_swa),
        "num_kv_heads": ctx.model.num_key_value_heads,
        "head_dim": ctx.model.head_dim,
        "num_layers": ctx.model.num_hidden_layers,
        "swa_layers": len(ctx.kv.swa_layers),
        "backend": s.transfer_backend,
        "skip_checks": bool(s.unsafe_skip_handshake_checks),
    }


def pools_desc(rank: RankKV) -> dict[str, Any]:
    """SGLang-shaped pointers of one rank's pools: {"full": {ptrs, item_lens}, "swa": {...} | None}."""
    out: dict[str, Any] = {
        "full": {"ptrs": rank.full.kv_ptrs(), "item_lens": rank.full.item_lens()},
        "swa": None,
    }
    if rank.swa is not None:
        out["swa"] = {"ptrs": rank.swa.kv_ptrs(), "item_lens": rank.swa.item_lens()}
    return out


def rank_regions(rank: RankKV) -> list[tuple[int, int]]:
    """(address, bytes) of every pool buffer of a rank: the memory peers write into / read from."""
    return [(int(p.buffer.data_ptr()), int(p.buffer.numel() * p.buffer.element_size())) for p in rank.pools()]


def advertised_host(host: str) -> str:
    """The address peers reach this server's transfer endpoints at (a wildcard bind is not an address)."""
    if host in ("", "0.0.0.0", "::"):
        try:
            return socket.gethostbyname(socket.gethostname())
        except OSError:
            return "127.0.0.1"
    return host


def make_backends(ctx: RoleContext, role: str) -> list[TransferBackend]:
    """One backend endpoint per rank with that rank's pools registered (as SGLang has one per GPU)."""
    host = advertised_host(ctx.settings.host)
    out = []
    for rank in ctx.kv.ranks:
        backend = create_backend(ctx.settings.transfer_backend, f"{role}{rank.rank}", host=host)
        backend.register(rank_regions(rank))
        out.append(backend)
    return out


class AuxSlots:
    """Fixed-size slots of registered host memory for aux data (first token + logprobs), one per request."""

    def __init__(self, count: int = 512) -> None:
        self.buffer = np.zeros(count * AUX_SLOT_BYTES, dtype=np.uint8)
        self._free = list(range(count - 1, -1, -1))
        self._lock = threading.Lock()

    @property
    def region(self) -> tuple[int, int]:
        """(address, bytes) to register."""
        return int(self.buffer.ctypes.data), int(self.buffer.nbytes)

    def alloc(self) -> int:
        """A free slot index; RuntimeError when every slot is in flight."""
        with self._lock:
            if not self._free:
                raise RuntimeError("too many PD transfers in flight (no free aux slot)")
            slot = self._free.pop()
        self.view(slot)[:4] = 0
        return slot

    def free(self, slot: int) -> None:
        """Return a slot."""
        with self._lock:
            self._free.append(slot)

    def addr(self, slot: int) -> int:
        """Address of a slot."""
        return int(self.buffer.ctypes.data) + slot * AUX_SLOT_BYTES

    def view(self, slot: int) -> np.ndarray:
        """The slot's bytes."""
        return self.buffer[slot * AUX_SLOT_BYTES : (slot + 1) * AUX_SLOT_BYTES]
