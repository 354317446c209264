"""Per-token (src_addr, dst_addr, length) blocks for a KV transfer, exactly as SGLang 0.5.23 builds them.

`head_slice_blocks` transcribes `_get_mha_head_slice_blocks` (disaggregation/common/conn.py): the path SGLang
takes when prefill and decode have different attention TP sizes, where every token of every page is one
descriptor carrying only the heads the decode rank owns. It rejects what SGLang rejects, with SGLang's
messages (pdctl/sglang/messages.py), so the reference engine fails the same way the real one does. `page_blocks` is the equal-TP path
(whole pages). numpy is imported lazily: check-compat imports this package without paying for numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from pdctl.plan.heads import head_slice_params, heads_on_rank
from pdctl.sglang import messages

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    import numpy.typing as npt

    Block = tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64], int]
else:
    Block = tuple


class HeadSliceError(RuntimeError):
    """A transfer SGLang refuses (its own RuntimeError messages); raised by the block builders."""


def split_kv_entries(
    src: Sequence[int], dst: Sequence[int], start_layer: int = 0
) -> tuple[list[int], list[int], list[int], list[int], int]:
    """SGLang's `get_mha_kv_ptrs_with_pp`: split K-then-V lists into K and V halves, on both sides.

    The decode side may hold more layers (decode pp=1 against a prefill PP stage starting at `start_layer`, or
    draft-model layers appended), so its K/V halves are sliced at the prefill stage's layers.
    """
    src = list(src)
    dst = list(dst)
    num_kv_layers = len(src) // 2
    end_layer = start_layer + num_kv_layers
    dst_layers = len(dst) // 2
    src_k, src_v = src[:num_kv_layers], src[num_kv_layers:]
    if num_kv_layers == dst_layers:
        dst_k, dst_v = dst[:dst_layers], dst[dst_layers:]
    elif num_kv_layers < dst_layers and dst_layers % num_kv_layers != 0:
        v_off = num_kv_layers * (dst_layers // num_kv_layers)
        dst_k = dst[start_layer:end_layer]
        dst_v = dst[v_off + start_layer : v_off + end_layer]
    else:
        dst_k = dst[start_layer:end_layer]
        dst_v = dst[dst_layers + start_layer : dst_layers + end_layer]
    return src_k, src_v, dst_k, dst_v, len(src_k)


def head_slice_blocks(
    src_ptrs: Sequence[int],
    src_item_lens: Sequence[int],
    dst_ptrs: Sequence[int],
    dst_item_lens: Sequence[int],
    src_pages: Any,
    dst_pages: Any,
    *,
    page_size: int,
    src_tp: int,
    src_rank: int,
    dst_tp: int,
    dst_rank: int,
    total_kv_heads: int,
    pp: int = 1,
    layout: str = "nhd",
) -> list[Block]:
    """Per layer-K/V entry: (src_addrs, dst_addrs, block_len), one address pair per token of every page.

    `*_ptrs` / `*_item_lens` are SGLang-shaped (all layers' K, then all layers' V; item_len = bytes of one page
    of one layer's K or V on that rank); `*_pages` are page indices (same count on both sides). Pages are NHD
    `[page_size, heads_on_rank, head_dim]`, so token t of page p, head h lives at
    `ptr + p*item_len + t*(heads_on_rank*head_len) + h*head_len`.
    """
    import numpy as np

    if pp > 1:
        raise HeadSliceError(messages.SWA_HETERO_TP_PP)
    if layout != "nhd":
        raise HeadSliceError(messages.head_slice_layout(layout))
    if page_size < 1:
        raise ValueError(f"page_size must be positive, got {page_size}")
    src_k, src_v, dst_k, dst_v, num_layers = split_kv_entries(src_ptrs, dst_ptrs)
    _, _, dst_k_lens, dst_v_lens, _ = split_kv_entries(src_item_lens, dst_item_lens)
    entries = list(zip(src_k + src_v, dst_k + dst_v, list(src_item_lens), dst_k_lens + dst_v_lens))
    if len(entries) != len(src_ptrs) or 2 * num_layers != len(src_ptrs):
        raise HeadSliceError(messages.head_slice_buffers(len(src_ptrs), len(dst_ptrs)))
    if len(src_pages) != len(dst_pages):
        raise HeadSliceError(messages.head_slice_pages(len(src_pages), len(dst_pages)))
    hs = head_slice_params(src_tp, dst_tp, src_rank, dst_rank, total_kv_heads)
    src_heads = heads_on_rank(total_kv_heads, src_tp)
    dst_heads = heads_on_rank(total_kv_heads, dst_tp)
    tokens = np.arange(page_size, dtype=np.uint64)
    sp = np.asarray(src_pages, dtype=np.uint64)[:, None]
    dp = np.asarray(dst_pages, dtype=np.uint64)[:, None]
    blocks: list[Block] = []
    for src_ptr, dst_ptr, src_len, dst_len in entries:
        head_len = src_len // (page_size * src_heads)
        if head_len * page_size * src_heads != src_len or head_len * page_size * dst_heads != dst_len:
            raise HeadSliceError(messages.head_slice_item_lens(src_len, dst_len, src_heads, dst_heads,
                                                               total_kv_heads, page_size))
        src_addrs = (
            np.uint64(src_ptr)
            + sp * np.uint64(src_len)
            + tokens * np.uint64(src_heads * head_len)
            + np.uint64(hs.src_head_start * head_len)
        )
        dst_addrs = (
            np.uint64(dst_ptr)
            + dp * np.uint64(dst_len)
            + tokens * np.uint64(dst_heads * head_len)
            + np.uint64(hs.dst_head_start * head_len)
        )
        blocks.append((src_addrs.ravel(), dst_addrs.ravel(), hs.num_heads * head_len))
    return blocks


def page_blocks(
    src_ptrs: Sequence[int],
    src_item_lens: Sequence[int],
    dst_ptrs: Sequence[int],
    dst_item_lens: Sequence[int],
    src_pages: Any,
    dst_pages: Any,
) -> list[Block]:
    """Equal-TP path: per layer-K/V entry one whole-page block per page, `(ptr + page*item_len, item_len)`.

    SGLang additionally merges runs of contiguous pages into one descriptor (`group_concurrent_contiguous`);
    this returns the unmerged pages so the caller can do either (see `merge_contiguous`).
    """
    import numpy as np

    src_k, src_v, dst_k, dst_v, _ = split_kv_entries(src_ptrs, dst_ptrs)
    _, _, dst_k_lens, dst_v_lens, _ = split_kv_entries(src_item_lens, dst_item_lens)
    dst_all = dst_k + dst_v
    dst_lens = dst_k_lens + dst_v_lens
    if len(dst_all) != len(src_ptrs) or len(src_item_lens) != len(src_ptrs):
        raise HeadSliceError(
            f"PD transfer needs matching per-layer K/V buffers: prefill has {len(src_ptrs)} entries, "
            f"decode has {len(dst_ptrs)}"
        )
    if len(src_pages) != len(dst_pages):
        raise HeadSliceError(f"PD transfer page count mismatch: prefill={len(src_pages)}, decode={len(dst_pages)}")
    sp = np.asarray(src_pages, dtype=np.uint64)
    dp = np.asarray(dst_pages, dtype=np.uint64)
    blocks: list[Block] = []
    for src_ptr, dst_ptr, src_len, dst_len in zip(src_k + src_v, dst_all, src_item_lens, dst_lens):
        if src_len != dst_len:
            raise HeadSliceError(
                f"KV item lengths differ at equal TP (prefill={src_len}, decode={dst_len}): "
                "the two sides do not hold the same heads"
            )
        blocks.append(
            (np.uint64(src_ptr) + sp * np.uint64(src_len), np.uint64(dst_ptr) + dp * np.uint64(dst_len), int(src_len))
        )
    return blocks


def merge_contiguous(src_pages: Any, dst_pages: Any) -> list[tuple[int, int, int]]:
    """SGLang's `group_concurrent_contiguous`: runs where both page lists step by one -> (src0, dst0, count)."""
    import numpy as np

    s = np.asarray(src_pages, dtype=np.int64)
    d = np.asarray(dst_pages, dtype=np.int64)
    if s.size == 0 or d.size == 0:
        return []
    if s.size != d.size:
        raise ValueError(f"page lists differ in length: {s.size} and {d.size}")
    brk = np.where((np.diff(s) != 1) | (np.diff(d) != 1))[0] + 1
    starts = np.concatenate([[0], brk])
    ends = np.concatenate([brk, [s.size]])
    return [(int(s[a]), int(d[a]), int(b - a)) for a, b in zip(starts, ends)]
