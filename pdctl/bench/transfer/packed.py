"""The packed transfer path: gather a rank pair's heads into contiguous runs, one descriptor per page run.

Why: SGLang's head-slice path posts one descriptor per token per layer-K/V (tens of bytes to a few KB each),
which is descriptor-bound. Packing moves the same bytes as one descriptor per run of contiguous pages per
layer-K/V: a side whose pages hold more heads than the pair exchanges gathers (prefill) or scatters (decode)
through a staging buffer; a side whose pages hold exactly those heads is read/written in place. Both processes
compute the same segment list from the shape, so staging offsets agree without being exchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pdctl.bench.transfer.rankmem import KVShape
from pdctl.plan import head_slice_params, heads_on_rank, merge_contiguous


@dataclass(frozen=True)
class Segment:
    """One descriptor of the packed path: `count` pages of one layer-K/V entry of one pool."""

    pool: str
    kv: int
    layer: int
    src_page: int
    dst_page: int
    count: int
    src_head: int
    dst_head: int
    heads: int
    offset: int  # byte offset in the pair's staging area
    nbytes: int


@dataclass(frozen=True)
class PairLayout:
    """All segments of one (prefill rank, decode rank) pair and whether each side stages."""

    src_rank: int
    dst_rank: int
    segments: list[Segment]
    gather: bool  # prefill pages hold more heads than sent -> gather into staging
    scatter: bool  # decode pages hold more heads than received -> scatter from staging

    @property
    def nbytes(self) -> int:
        """Payload bytes of the pair."""
        return sum(s.nbytes for s in self.segments)


def pair_layout(
    *,
    kv_heads: int,
    page_size: int,
    head_bytes: int,
    layers: dict[str, int],
    src_pages: dict[str, list[int]],
    dst_pages: dict[str, list[int]],
    src_tp: int,
    dst_tp: int,
    src_rank: int,
    dst_rank: int,
) -> PairLayout:
    """Segments for one pair, in a fixed order (pool, K then V, layer, run) that fixes staging offsets."""
    hs = head_slice_params(src_tp, dst_tp, src_rank, dst_rank, kv_heads)
    gather = hs.num_heads < heads_on_rank(kv_heads, src_tp)
    scatter = hs.num_heads < heads_on_rank(kv_heads, dst_tp)
    segments: list[Segment] = []
    offset = 0
    for pool, n_layers in layers.items():
        runs = merge_contiguous(src_pages[pool], dst_pages[pool])
        for kv in (0, 1):
            for layer in range(n_layers):
                for s0, d0, count in runs:
                    nbytes = count * page_size * hs.num_heads * head_bytes
                    segments.append(
                        Segment(
                            pool,
                            kv,
                            layer,
                            s0,
                            d0,
                            count,
                            hs.src_head_start,
                            hs.dst_head_start,
                            hs.num_heads,
                            offset,
                            nbytes,
                        )
                    )
                    offset += nbytes
    return PairLayout(src_rank, dst_rank, segments, gather, scatter)


PIPELINE_CHUNKS = 4  # writes per rank pair, so decode scatters chunk i while chunk i+1 is on the wire



def shape_pair_layout(
    shape: KVShape, pages: dict[str, list[int]], *, src_tp: int, dst_tp: int, src_rank: int, dst_rank: int
) -> PairLayout:
    """`pair_layout` for a bench request of SHAPE whose pages have the same ids on both sides: the one call both
    bench processes make, so prefill's gather and decode's scatter always agree on the staging layout."""
    return pair_layout(
        kv_heads=shape.kv_heads,
        page_size=shape.page_size,
        head_bytes=shape.head_bytes,
        layers=shape.pool_layers(),
        src_pages=pages,
        dst_pages=pages,
        src_tp=src_tp,
        dst_tp=dst_tp,
        src_rank=src_rank,
        dst_rank=dst_rank,
    )

def chunk_ranges(n_segments: int, chunks: int = PIPELINE_CHUNKS) -> list[range]:
    """Split a pair's segments into consecutive chunks (both sides compute the same split)."""
    k = max(1, min(chunks, n_segments))
    return [range(i * n_segments // k, (i + 1) * n_segments // k) for i in range(k)]


def staging_view(staging: np.ndarray, seg: Segment, page_size: int, head_bytes: int) -> np.ndarray:
    """The segment's bytes in a staging buffer, as `[count, page_size, heads, head_bytes]`."""
    return staging[seg.offset : seg.offset + seg.nbytes].reshape(seg.count, page_size, seg.heads, head_bytes)


def pool_slice(pool: np.ndarray, seg: Segment, *, src: bool) -> np.ndarray:
    """The segment's heads in a pool `[2, L, pages, page_size, heads, head_bytes]` (a strided view)."""
    page = seg.src_page if src else seg.dst_page
    head = seg.src_head if src else seg.dst_head
    return pool[seg.kv, seg.layer, page : page + seg.count, :, head : head + seg.heads, :]


def gather(
    layout: PairLayout,
    pools: dict[str, np.ndarray],
    staging: np.ndarray,
    page_size: int,
    head_bytes: int,
    only: range | None = None,
) -> None:
    """Prefill side: copy the pair's heads (segments `only`, default all) out of the pools into staging."""
    for seg in layout.segments if only is None else layout.segments[only.start : only.stop]:
        staging_view(staging, seg, page_size, head_bytes)[...] = pool_slice(pools[seg.pool], seg, src=True)


def scatter(
    layout: PairLayout,
    pools: dict[str, np.ndarray],
    staging: np.ndarray,
    page_size: int,
    head_bytes: int,
    only: range | None = None,
) -> None:
    """Decode side: copy received staging bytes (segments `only`, default all) into the pages' head slots."""
    for seg in layout.segments if only is None else layout.segments[only.start : only.stop]:
        pool_slice(pools[seg.pool], seg, src=False)[...] = staging_view(staging, seg, page_size, head_bytes)


def descriptors(
    layout: PairLayout,
    *,
    src_base: dict[str, int] | int,
    dst_base: dict[str, int] | int,
    src_pools: dict[str, tuple[int, list[int]]],
    dst_pools: dict[str, tuple[int, list[int]]],
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(src, dst, len) arrays: staging addresses on a staging side, page-run addresses on an in-place side.

    `*_pools[name] = (item_len, kv_ptrs)`; `*_base` is the staging buffer address (used when that side stages).
    """
    src, dst, lens = [], [], []
    for seg in layout.segments:
        if layout.gather:
            src.append(int(src_base) + seg.offset)  # type: ignore[arg-type]
        else:
            item, ptrs = src_pools[seg.pool]
            src.append(ptrs[seg.kv * (len(ptrs) // 2) + seg.layer] + seg.src_page * item)
        if layout.scatter:
            dst.append(int(dst_base) + seg.offset)  # type: ignore[arg-type]
        else:
            item, ptrs = dst_pools[seg.pool]
            dst.append(ptrs[seg.kv * (len(ptrs) // 2) + seg.layer] + seg.dst_page * item)
        lens.append(seg.nbytes)
    return (
        np.asarray(src, dtype=np.uint64),
        np.asarray(dst, dtype=np.uint64),
        np.asarray(lens, dtype=np.uint64),
    )
