"""Which KV heads each prefill rank sends to which decode rank (SGLang 0.5.23's head-slice arithmetic).

This is a transcription of `compute_head_slice_params` (disaggregation/common/staging_buffer.py) and of the
decode side's rank mapping (`_resolve_rank_mapping` in disaggregation/common/conn.py). pdctl uses it to show
the ownership map before launch, the reference engine uses it to move KV between ranks, and the property tests
hold it against an independent transcription, so that all three agree with what SGLang will really do.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HeadSlice:
    """One (prefill rank -> decode rank) head slice: `num_heads` heads, starting at each side's local index."""

    src_head_start: int
    num_heads: int
    dst_head_start: int


def heads_on_rank(total_kv_heads: int, tp: int) -> int:
    """KV heads held by one attention-TP rank: `max(1, H // tp)` (a head is replicated when tp > H)."""
    _check_positive(total_kv_heads=total_kv_heads, tp=tp)
    return max(1, total_kv_heads // tp)


def replication(total_kv_heads: int, tp: int) -> int:
    """How many consecutive ranks hold the same KV head (1 unless tp > H), as SGLang counts replicas."""
    _check_positive(total_kv_heads=total_kv_heads, tp=tp)
    return max(1, tp // total_kv_heads)


def global_head(total_kv_heads: int, tp: int, rank: int, local_head: int) -> int:
    """The model-wide KV head index that `local_head` on `rank` holds (SGLang's `tp_rank // replicas`)."""
    hpr = heads_on_rank(total_kv_heads, tp)
    return (rank // replication(total_kv_heads, tp)) * hpr + local_head


def head_slice_params(src_tp: int, dst_tp: int, src_rank: int, dst_rank: int, total_kv_heads: int) -> HeadSlice:
    """SGLang's `compute_head_slice_params`: the heads a prefill rank writes into a decode rank's pages.

    The rank with fewer heads per rank decides: when prefill is wider each prefill rank sends all of its heads
    to an offset in the decode rank; when decode is wider (or equal) the decode rank pulls its heads from an
    offset in the prefill rank. Ranks are taken modulo their attention-TP size, as SGLang does.
    """
    _check_positive(src_tp=src_tp, dst_tp=dst_tp, total_kv_heads=total_kv_heads)
    src_hpr = heads_on_rank(total_kv_heads, src_tp)
    dst_hpr = heads_on_rank(total_kv_heads, dst_tp)
    if src_tp > dst_tp:
        unique = (src_rank % src_tp) // replication(total_kv_heads, src_tp)
        return HeadSlice(0, src_hpr, (unique * src_hpr) % dst_hpr)
    unique = (dst_rank % dst_tp) // replication(total_kv_heads, dst_tp)
    return HeadSlice((unique * dst_hpr) % src_hpr, dst_hpr, 0)


def prefill_peers(prefill_tp: int, decode_tp: int, decode_rank: int) -> list[int]:
    """The prefill attention-TP ranks that send KV to `decode_rank` (SGLang's `target_tp_ranks`).

    Equal TP pairs rank with rank; a wider decode has several decode ranks pull from one prefill rank;
    a wider prefill has `prefill_tp // decode_tp` prefill ranks each send a slice to one decode rank.
    """
    _check_positive(prefill_tp=prefill_tp, decode_tp=decode_tp)
    local = decode_rank % decode_tp
    if prefill_tp == decode_tp:
        return [local]
    if decode_tp > prefill_tp:
        return [local // (decode_tp // prefill_tp)]
    k = prefill_tp // decode_tp
    return list(range(local * k, (local + 1) * k))


def decode_peers(prefill_tp: int, decode_tp: int, prefill_rank: int) -> list[int]:
    """The decode ranks one prefill rank writes to (the inverse of `prefill_peers`)."""
    return [d for d in range(decode_tp) if prefill_rank in prefill_peers(prefill_tp, decode_tp, d)]


def ratio_ok(prefill_tp: int, decode_tp: int) -> bool:
    """True when one attention TP divides the other; SGLang's rank mapping assumes an integer ratio."""
    return prefill_tp % decode_tp == 0 or decode_tp % prefill_tp == 0


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive integer, got {value!r}")


def ownership_map(prefill_tp: int, decode_tp: int, total_kv_heads: int) -> list[dict[str, object]]:
    """For each decode rank: its global KV heads and, per prefill peer, which heads it writes where.

    This is the table check-compat shows: it lets a person see replication (several ranks holding one head)
    and the offsets SGLang will use, before anything runs.
    """
    rows: list[dict[str, object]] = []
    dst_hpr = heads_on_rank(total_kv_heads, decode_tp)
    for d in range(decode_tp):
        sources = []
        for p in prefill_peers(prefill_tp, decode_tp, d):
            hs = head_slice_params(prefill_tp, decode_tp, p, d, total_kv_heads)
            first = global_head(total_kv_heads, prefill_tp, p, hs.src_head_start)
            sources.append(
                {
                    "prefill_rank": p,
                    "src_head_start": hs.src_head_start,
                    "num_heads": hs.num_heads,
                    "dst_head_start": hs.dst_head_start,
                    "global_heads": [first, first + hs.num_heads],
                }
            )
        first_dst = global_head(total_kv_heads, decode_tp, d, 0)
        rows.append({"decode_rank": d, "global_heads": [first_dst, first_dst + dst_hpr], "sources": sources})
    return rows
