"""An independent transcription of SGLang 0.5.23's head-slice code, kept apart from pdctl.plan on purpose.

Written from disaggregation/common/staging_buffer.py::compute_head_slice_params and
common/conn.py::_get_mha_head_slice_blocks / _resolve_rank_mapping with plain Python loops (no numpy), so a
property test can hold pdctl's vectorised implementation against it.
"""

from __future__ import annotations


def sglang_head_slice(src_attn_tp, dst_attn_tp, src_tp_rank, dst_tp_rank, total_kv_heads):
    src_heads_per_rank = max(1, total_kv_heads // src_attn_tp)
    dst_heads_per_rank = max(1, total_kv_heads // dst_attn_tp)
    local_tp_rank = src_tp_rank % src_attn_tp
    dst_tp_rank_in_group = dst_tp_rank % dst_attn_tp
    if src_attn_tp > dst_attn_tp:
        src_head_start = 0
        num_heads_to_send = src_heads_per_rank
        src_replication = max(1, src_attn_tp // total_kv_heads)
        unique_head_idx = local_tp_rank // src_replication
        dst_head_start = (unique_head_idx * src_heads_per_rank) % dst_heads_per_rank
    else:
        dst_replication = max(1, dst_attn_tp // total_kv_heads)
        unique_dst_head_idx = dst_tp_rank_in_group // dst_replication
        src_head_start = (unique_dst_head_idx * dst_heads_per_rank) % src_heads_per_rank
        num_heads_to_send = dst_heads_per_rank
        dst_head_start = 0
    return src_head_start, num_heads_to_send, dst_head_start


def sglang_target_ranks(prefill_attn_tp, decode_attn_tp, engine_rank):
    if decode_attn_tp == prefill_attn_tp:
        return [engine_rank % decode_attn_tp]
    if decode_attn_tp > prefill_attn_tp:
        return [(engine_rank % decode_attn_tp) // (decode_attn_tp // prefill_attn_tp)]
    k = prefill_attn_tp // decode_attn_tp
    r = engine_rank % decode_attn_tp
    return list(range(r * k, (r + 1) * k))


def sglang_blocks(src_ptrs, src_item_lens, dst_ptrs, dst_item_lens, src_pages, dst_pages, page_size,
                  src_tp, src_rank, dst_tp, dst_rank, total_kv_heads):
    """Loop version of the per-token address formula (pp=1, NHD), same K-then-V entry order."""
    n = len(src_ptrs) // 2
    s0, nh, d0 = sglang_head_slice(src_tp, dst_tp, src_rank, dst_rank, total_kv_heads)
    sh = max(1, total_kv_heads // src_tp)
    dh = max(1, total_kv_heads // dst_tp)
    out = []
    for e in range(2 * n):
        sl, dl = src_item_lens[e], dst_item_lens[e]
        head_len = sl // (page_size * sh)
        srcs, dsts = [], []
        for sp, dp in zip(src_pages, dst_pages):
            for t in range(page_size):
                srcs.append(src_ptrs[e] + sp * sl + t * (sh * head_len) + s0 * head_len)
                dsts.append(dst_ptrs[e] + dp * dl + t * (dh * head_len) + d0 * head_len)
        out.append((srcs, dsts, nh * head_len))
    return out
