"""What one prefill rank writes for one request to one decode rank: pages paired, blocks built by pdctl.plan.

Pure functions (no I/O), so the page pairing and address arithmetic are unit-tested on their own; the PD
roles call them with real pool pointers. Equal attention TP sends whole pages (`page_blocks`), unequal TP the
per-token head slices (`head_slice_blocks`), exactly SGLang's choice; SWA layers send only window pages.
"""

from __future__ import annotations

import json
import struct
from typing import Any

import numpy as np

from pdctl.plan import head_slice_blocks, page_blocks
from pdctl.transfer.backends.base import flatten_blocks

AUX_SLOT_BYTES = 8192  # one request's aux data (first token, logprob, top logprobs) as length-prefixed JSON


def full_page_pairs(
    src_pages: list[int], dst_pages: list[int], dst_cached_len: int, page_size: int
) -> tuple[list[int], list[int]]:
    """Full-attention pages to send: every prompt page the decode side does not already hold (radix cache)."""
    n = min(len(src_pages), len(dst_pages))
    start = min(n, max(0, dst_cached_len) // page_size)
    return list(src_pages[start:n]), list(dst_pages[start:n])


def swa_page_pairs(
    src_first: int, src_pages: list[int], dst_first: int, dst_pages: list[int]
) -> tuple[list[int], list[int]]:
    """SWA window pages both sides hold, paired by logical page index (each side starts at its `first`)."""
    lo = max(src_first, dst_first)
    hi = min(src_first + len(src_pages), dst_first + len(dst_pages))
    src, dst = [], []
    for logical in range(lo, hi):
        s, d = src_pages[logical - src_first], dst_pages[logical - dst_first]
        if s >= 0 and d >= 0:
            src.append(s)
            dst.append(d)
    return src, dst


def rank_blocks(
    *,
    src_pools: dict[str, Any],
    dst_pools: dict[str, Any],
    pages: dict[str, tuple[list[int], list[int]]],
    page_size: int,
    src_tp: int,
    src_rank: int,
    dst_tp: int,
    dst_rank: int,
    kv_heads: int,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat (src, dst, len) descriptors of one rank pair over every pool ("full", "swa").

    `*_pools[name] = {"ptrs": [...], "item_lens": [...]}` (SGLang-shaped); `pages[name] = (src, dst)`.
    The layout is not re-checked here: the handshake is the guard (and `--unsafe-skip-handshake-checks`
    must be able to show what happens without it).
    """
    blocks: list[Any] = []
    for name, (src_pages, dst_pages) in pages.items():
        if not src_pages or src_pools.get(name) is None or dst_pools.get(name) is None:
            continue
        sp, dp = src_pools[name], dst_pools[name]
        if src_tp == dst_tp:
            blocks += page_blocks(
                sp["ptrs"], sp["item_lens"], dp["ptrs"], dp["item_lens"], src_pages, dst_pages
            )
        else:
            blocks += head_slice_blocks(
                sp["ptrs"],
                sp["item_lens"],
                dp["ptrs"],
                dp["item_lens"],
                src_pages,
                dst_pages,
                page_size=page_size,
                src_tp=src_tp,
                src_rank=src_rank,
                dst_tp=dst_tp,
                dst_rank=dst_rank,
                total_kv_heads=kv_heads,
                layout="nhd",
            )
    return flatten_blocks(blocks)


def encode_aux(
    token_id: int, logprob: float, top_logprobs: list[tuple[float, int]], cached_tokens: int = 0
) -> bytes:
    """SGLang's aux data for decode, as one slot: 4-byte length + JSON (too big -> ValueError).

    `cached_tokens` is the prefill's prefix-cache hit: SGLang's decode reports it as its own
    meta_info.cached_tokens, so the router's answer says how much of the prompt prefill reused.
    """
    top = [[float(a), int(b)] for a, b in top_logprobs]
    body = json.dumps({"t": token_id, "l": logprob, "top": top, "c": int(cached_tokens)}).encode()
    if len(body) + 4 > AUX_SLOT_BYTES:
        raise ValueError(f"aux data of {len(body)} bytes does not fit a {AUX_SLOT_BYTES}-byte slot")
    return struct.pack("<I", len(body)) + body


def _aux_doc(slot: bytes) -> dict[str, Any]:
    (n,) = struct.unpack("<I", slot[:4])
    if n == 0 or n + 4 > len(slot):
        raise ValueError("aux slot is empty or corrupt (the prefill's aux write did not land)")
    return dict(json.loads(slot[4 : 4 + n]))


def decode_aux(slot: bytes) -> tuple[int, float, list[tuple[float, int]]]:
    """Inverse of encode_aux (first token part); a slot that was never written raises ValueError."""
    doc = _aux_doc(slot)
    return int(doc["t"]), float(doc["l"]), [(float(a), int(b)) for a, b in doc["top"]]


def aux_cached_tokens(slot: bytes) -> int:
    """The prefill's prefix-cache hit carried in the aux slot (0 from a sender that did not set it)."""
    return int(_aux_doc(slot).get("c", 0))
