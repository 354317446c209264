"""Host KV memory of one rank shaped like SGLang's pools, filled from / checked against known content.

bench-transfer needs real prefill-rank and decode-rank buffers in two processes and must prove every byte
landed where SGLang's address rule says. Both processes regenerate the same "global" KV (all heads, all
tokens) from a seed; each rank holds its heads of it, so the decode side can check its pools byte for byte
without shipping the expected data between processes.
"""

from __future__ import annotations

import numpy as np

from pdctl.plan import global_head, heads_on_rank
from pdctl.plan.request import KVShape


def global_kv(shape: KVShape, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The request's KV for all heads: full `[2, Lf, P*ps, H, hb]`, SWA `[2, Ls, S*ps, H, hb]` (random bytes)."""
    rng = np.random.default_rng(seed)

    def make(layers: int, pages: int) -> np.ndarray:
        dims = (2, layers, pages * shape.page_size, shape.kv_heads, shape.head_bytes)
        return np.frombuffer(rng.bytes(int(np.prod(dims))), dtype=np.uint8).reshape(dims)

    full = make(shape.full_layers, shape.full_pages)
    swa = make(shape.swa_layers, shape.swa_pages) if shape.swa_layers and shape.swa_pages else None
    return full, swa


class RankMemory:
    """One rank's pools: `full[kv, layer, page, token, head, byte]` and `swa[...]`, pages 1.. hold the request.

    Page 0 stays untouched (SGLang reserves it), which also lets verification see stray writes.
    """

    def __init__(self, shape: KVShape, tp: int, rank: int) -> None:
        self.shape = shape
        self.tp = tp
        self.rank = rank
        self.heads = heads_on_rank(shape.kv_heads, tp)
        self.first_head = global_head(shape.kv_heads, tp, rank, 0)
        ps, hb = shape.page_size, shape.head_bytes
        self.full = np.zeros((2, shape.full_layers, shape.full_pages + 1, ps, self.heads, hb), dtype=np.uint8)
        self.swa = (
            np.zeros((2, shape.swa_layers, shape.swa_pages + 1, ps, self.heads, hb), dtype=np.uint8)
            if shape.swa_layers and shape.swa_pages
            else None
        )
        self.full_page_ids = list(range(1, shape.full_pages + 1))
        self.swa_page_ids = list(range(1, shape.swa_pages + 1)) if self.swa is not None else []

    def pools(self) -> dict[str, np.ndarray]:
        """Pools by name ("full", and "swa" when present)."""
        return {"full": self.full} | ({"swa": self.swa} if self.swa is not None else {})

    def regions(self) -> list[tuple[int, int]]:
        """(address, length) of every pool, for registration."""
        return [(int(p.ctypes.data), int(p.nbytes)) for p in self.pools().values()]

    @staticmethod
    def kv_ptrs(pool: np.ndarray) -> list[int]:
        """SGLang-shaped pointers: every layer's K region, then every layer's V region."""
        base = int(pool.ctypes.data)
        stride = int(pool.strides[1])
        return [base + i * stride for i in range(2 * pool.shape[1])]

    @staticmethod
    def item_lens(pool: np.ndarray) -> list[int]:
        """Bytes of one page of one layer's K (or V), for each entry of kv_ptrs."""
        return [int(pool.strides[2])] * (2 * pool.shape[1])

    def page_ids(self, name: str) -> list[int]:
        """The request's pages in pool NAME."""
        return self.full_page_ids if name == "full" else self.swa_page_ids

    def fill(self, kv: dict[str, np.ndarray | None]) -> None:
        """Write this rank's heads of the global KV into the request's pages (the prefill side's state)."""
        for name, pool in self.pools().items():
            src = kv[name]
            assert src is not None
            mine = src[:, :, :, self.first_head : self.first_head + self.heads]
            pool[:, :, 1:] = mine.reshape(pool[:, :, 1:].shape)

    def clear(self) -> None:
        """Zero every pool (before each measured path)."""
        for pool in self.pools().values():
            pool.fill(0)

    def mismatched_bytes(self, kv: dict[str, np.ndarray | None]) -> int:
        """Bytes that differ from what this rank must hold after the transfer (stray writes to page 0 count)."""
        bad = 0
        for name, pool in self.pools().items():
            src = kv[name]
            assert src is not None
            want = src[:, :, :, self.first_head : self.first_head + self.heads].reshape(pool[:, :, 1:].shape)
            bad += int(np.count_nonzero(pool[:, :, 1:] != want))
            bad += int(np.count_nonzero(pool[:, :, 0]))
        return bad
