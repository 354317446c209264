"""Paged KV cache per TP rank: one contiguous buffer per pool, per-layer K and V pages, page allocators.

Why this shape: the PD transfer layer registers each rank's pool memory with NIXL/Mooncake and writes KV
into it with SGLang's address arithmetic, so the memory must look like SGLang's: for every layer of a pool
a K region then (after all layers' K) a V region, each `[num_pages, page_size, heads_on_rank, head_dim]`
(NHD) — `kv_ptrs()`/`item_lens()` list all layers' K then all layers' V, item_len = bytes of one page of one
layer's K on this rank. `kv_layout` hnd / vectorized_5d store the same page in another element order; the
writer and the attention's reader both honour `layout`, and `read_layout` lets a test read in another order
to prove the attention really reads these pages.

Hybrid SWA: full-attention layers live in the full pool; sliding layers in a separate SWA pool that only
holds the window's pages (the scheduler frees the rest as the window slides). With hybrid memory off every
layer is in the full pool. Page 0 of each pool is reserved (never handed out), as in SGLang.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch

from pdctl.reference.config import KV_LAYOUTS as LAYOUTS

VEC_X = 4  # elements per innermost vector in vectorized_5d (16 bytes of float32)


class KVCacheOOM(RuntimeError):
    """Not enough free pages; the request gets this message as an error, the server keeps serving."""


class PageAllocator:
    """Reference-counted page allocator for one pool kind (shared by all ranks: page ids match across ranks).

    Refcounts let the prefix cache and running requests share pages; a page returns to the free list when
    its last holder releases it.
    """

    def __init__(self, num_pages: int, name: str, page_size: int) -> None:
        self.name = name
        self.num_pages = num_pages
        self.page_size = page_size
        self._free = list(range(num_pages - 1, 0, -1))  # pop() hands out low ids first
        self._refs = [0] * num_pages
        self._lock = threading.Lock()

    @property
    def free_pages(self) -> int:
        """Pages currently free."""
        return len(self._free)

    @property
    def usable_pages(self) -> int:
        """Pages that can ever be allocated (all but the reserved page 0)."""
        return self.num_pages - 1

    def alloc(self, n: int) -> list[int]:
        """N fresh pages (refcount 1); raises KVCacheOOM with a clear message when they are not there."""
        with self._lock:
            if n > len(self._free):
                raise KVCacheOOM(
                    f"KV cache out of memory in the {self.name} pool: need {n} pages of {self.page_size} tokens, "
                    f"{len(self._free)} of {self.num_pages - 1} free (raise --max-total-tokens)"
                )
            pages = [self._free.pop() for _ in range(n)]
            for p in pages:
                self._refs[p] = 1
            return pages

    def incref(self, pages: list[int]) -> None:
        """Add a holder to each page (e.g. the prefix cache keeping a request's pages)."""
        with self._lock:
            for p in pages:
                if self._refs[p] <= 0:
                    raise RuntimeError(f"incref of free page {p} in {self.name} pool")
                self._refs[p] += 1

    def release(self, pages: list[int]) -> None:
        """Drop one holder from each page; pages nobody holds go back to the free list."""
        with self._lock:
            for p in pages:
                if self._refs[p] <= 0:
                    raise RuntimeError(f"double free of page {p} in {self.name} pool")
                self._refs[p] -= 1
                if self._refs[p] == 0:
                    self._free.append(p)

    def refcount(self, page: int) -> int:
        """Current holders of PAGE (tests and the prefix cache's eviction use it)."""
        return self._refs[page]


class KVPool:
    """One rank's memory for one pool kind: K and V pages of `layer_ids`, in one contiguous buffer."""

    def __init__(
        self,
        name: str,
        layer_ids: list[int],
        num_pages: int,
        page_size: int,
        heads: int,
        head_dim: int,
        layout: str = "nhd",
        dtype: torch.dtype = torch.float32,
    ) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"unknown kv layout {layout!r}; expected one of {LAYOUTS}")
        if layout == "vectorized_5d" and head_dim % VEC_X:
            raise ValueError(f"vectorized_5d needs head_dim divisible by {VEC_X}")
        self.name = name
        self.layer_ids = list(layer_ids)
        self._local = {layer: i for i, layer in enumerate(self.layer_ids)}
        self.num_pages = num_pages
        self.page_size = page_size
        self.heads = heads
        self.head_dim = head_dim
        self.layout = layout
        self.read_layout = layout  # debug hook: read pages in another element order than written
        self.page_elems = page_size * heads * head_dim
        # [K|V, layer, page, elements-of-one-page]; memory order = all layers' K, then all layers' V.
        self.buffer = torch.zeros((2, len(self.layer_ids), num_pages, self.page_elems), dtype=dtype)

    @property
    def item_len(self) -> int:
        """Bytes of one page of one layer's K (or V) on this rank."""
        return self.page_elems * self.buffer.element_size()

    def kv_ptrs(self) -> list[int]:
        """Base address of every layer's K region, then every layer's V region (SGLang's kv_data_ptrs)."""
        return [self.buffer[kv, i].data_ptr() for kv in (0, 1) for i in range(len(self.layer_ids))]

    def item_lens(self) -> list[int]:
        """item_len for each entry of kv_ptrs()."""
        return [self.item_len] * (2 * len(self.layer_ids))

    def has_layer(self, layer: int) -> bool:
        """Whether LAYER's K/V live in this pool."""
        return layer in self._local

    def _view(self, kv: int, layer: int, layout: str) -> torch.Tensor:
        region = self.buffer[kv, self._local[layer]]
        ps, h, d = self.page_size, self.heads, self.head_dim
        if layout == "nhd":
            return region.view(self.num_pages, ps, h, d)
        if layout == "hnd":
            return region.view(self.num_pages, h, ps, d)
        return region.view(self.num_pages, h, d // VEC_X, ps, VEC_X)

    def write(self, layer: int, pages: torch.Tensor, offsets: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store token rows K/V `[T, heads, head_dim]` at (PAGES[t], OFFSETS[t]) in the configured layout."""
        for kv, x in ((0, k), (1, v)):
            view = self._view(kv, layer, self.layout)
            if self.layout == "nhd":
                view[pages, offsets] = x
            elif self.layout == "hnd":
                view[pages, :, offsets, :] = x
            else:
                view[pages, :, :, offsets, :] = x.reshape(x.shape[0], self.heads, self.head_dim // VEC_X, VEC_X)

    def read(self, layer: int, pages: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of whole PAGES as token rows `[len(pages) * page_size, heads, head_dim]` (read_layout)."""
        out = []
        n = pages.shape[0]
        for kv in (0, 1):
            g = self._view(kv, layer, self.read_layout)[pages]
            if self.read_layout == "hnd":
                g = g.permute(0, 2, 1, 3)
            elif self.read_layout == "vectorized_5d":
                g = g.permute(0, 3, 1, 2, 4)
            out.append(g.reshape(n * self.page_size, self.heads, self.head_dim))
        return out[0], out[1]


@dataclass
class RankKV:
    """The pools of one TP rank: `full` always; `swa` only when hybrid SWA memory is on."""

    rank: int
    full: KVPool
    swa: KVPool | None

    def pool_for(self, layer: int) -> KVPool:
        """The pool holding LAYER's K/V."""
        if self.swa is not None and self.swa.has_layer(layer):
            return self.swa
        return self.full

    def pools(self) -> list[KVPool]:
        """Every pool of this rank (full first), e.g. to register with a transfer backend."""
        return [self.full] + ([self.swa] if self.swa is not None else [])


class KVCache:
    """All ranks' pools plus the shared page allocators (`full`, and `swa` when hybrid SWA memory is on)."""

    def __init__(
        self,
        *,
        tp: int,
        layer_is_sliding: list[bool],
        heads_on_rank: int,
        head_dim: int,
        page_size: int,
        max_total_tokens: int,
        swa_tokens: int | None,
        hybrid_swa: bool,
        layout: str = "nhd",
    ) -> None:
        self.page_size = page_size
        self.hybrid_swa = hybrid_swa and any(layer_is_sliding)
        n_layers = len(layer_is_sliding)
        swa_layers = [i for i in range(n_layers) if layer_is_sliding[i]] if self.hybrid_swa else []
        full_layers = [i for i in range(n_layers) if i not in swa_layers]
        # SGLang's alignment: whole pages, rounded down (max_total_num_tokens // page_size * page_size), plus
        # the reserved page 0; /server_info and /metrics then report what the pool really holds
        full_pages = max_total_tokens // page_size + 1
        swa_pages = max(1, (swa_tokens or max_total_tokens) // page_size) + 1
        self.full_alloc = PageAllocator(full_pages, "full", page_size)
        self.swa_alloc = PageAllocator(swa_pages, "swa", page_size) if swa_layers else None
        self.ranks: list[RankKV] = []
        for r in range(tp):
            full = KVPool("full", full_layers, full_pages, page_size, heads_on_rank, head_dim, layout)
            swa = KVPool("swa", swa_layers, swa_pages, page_size, heads_on_rank, head_dim, layout) if swa_layers else None
            self.ranks.append(RankKV(r, full, swa))
        self.swa_layers = swa_layers
        self.full_layers = full_layers

    def is_swa_layer(self, layer: int) -> bool:
        """Whether LAYER's pages come from the SWA allocator (sliding layer with hybrid memory on)."""
        return layer in self.swa_layers

    def set_read_layout(self, layout: str) -> None:
        """Debug hook for tests: make every pool read pages in LAYOUT while still writing in its own."""
        for rk in self.ranks:
            for pool in rk.pools():
                pool.read_layout = layout


@dataclass
class SeqPages:
    """One sequence's page tables (the same page ids on every rank).

    `full[i]` is the full-pool page of logical page i (tokens [i*page_size, (i+1)*page_size)); `swa[i]` the
    SWA-pool page, or -1 once the window has slid past it and it was released. Empty `swa` when hybrid SWA
    memory is off.
    """

    full: list[int]
    swa: list[int]

