"""Block addresses equal SGLang's per-token formula, and applying them moves exactly the right bytes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdctl.plan import (
    HeadSliceError,
    head_slice_blocks,
    heads_on_rank,
    merge_contiguous,
    page_blocks,
    prefill_peers,
    ratio_ok,
)
from tests.support.sglang_transcription import sglang_blocks

HEAD_LEN = 4  # bytes of one head of one token (head_dim * dtype bytes), kept tiny


@st.composite
def combos(draw):
    h = draw(st.sampled_from([1, 2, 3, 4, 6, 8, 16]))
    tps = [t for t in (1, 2, 3, 4, 6, 8, 16, 32) if h % t == 0 or t % h == 0]
    p = draw(st.sampled_from(tps))
    d = draw(st.sampled_from([t for t in tps if ratio_ok(p, t)]))
    page_size = draw(st.sampled_from([1, 2, 3, 4, 16]))
    num_pages = draw(st.integers(0, 5))
    pool_pages = num_pages + draw(st.integers(0, 3))
    src_pages = draw(st.permutations(list(range(pool_pages))))[:num_pages]
    dst_pages = draw(st.permutations(list(range(pool_pages))))[:num_pages]
    layers = draw(st.integers(1, 3))
    dr = draw(st.integers(0, d - 1))
    return h, p, d, dr, page_size, src_pages, dst_pages, pool_pages, layers


def _pool(h, tp, rank, page_size, pool_pages, layers, base):
    """A rank's K/V buffers (all K then all V) and the code every byte holds: (entry, model head, page, token)."""
    hpr = heads_on_rank(h, tp)
    item = page_size * hpr * HEAD_LEN
    ptrs = [base + e * pool_pages * item for e in range(2 * layers)]
    i = np.arange(2 * layers * pool_pages * item, dtype=np.int64)
    entry, rem = np.divmod(i, pool_pages * item)
    page, rem = np.divmod(rem, item)
    tok, rem = np.divmod(rem, hpr * HEAD_LEN)
    model_head = (rank // max(1, tp // h)) * hpr + rem // HEAD_LEN  # == global_head(h, tp, rank, local)
    codes = ((entry * 1000 + model_head) * 1000 + page) * 100 + tok
    return ptrs, [item] * (2 * layers), codes


@settings(max_examples=1500, deadline=None)
@given(combos())
def test_addresses_match_transcription_and_move_the_right_heads(c):
    h, p, d, dr, ps, sp, dp, pool_pages, layers = c
    dst_ptrs, dst_lens, dst_codes = _pool(h, d, dr, ps, pool_pages, layers, base=1 << 40)
    dst_mem = np.full(dst_codes.size, -1, dtype=np.int64)
    for pr in prefill_peers(p, d, dr):
        src_ptrs, src_lens, src_codes = _pool(h, p, pr, ps, pool_pages, layers, base=1 << 20)
        blocks = head_slice_blocks(src_ptrs, src_lens, dst_ptrs, dst_lens, sp, dp, page_size=ps,
                                   src_tp=p, src_rank=pr, dst_tp=d, dst_rank=dr, total_kv_heads=h)
        ref = sglang_blocks(src_ptrs, src_lens, dst_ptrs, dst_lens, sp, dp, ps, p, pr, d, dr, h)
        assert len(blocks) == len(ref) == 2 * layers
        for (sa, da, n), (rs, rd, rn) in zip(blocks, ref):
            assert sa.dtype == np.uint64 and da.dtype == np.uint64
            assert sa.tolist() == rs and da.tolist() == rd and n == rn
            # simulate the transfer: copy n bytes from every source address to its destination address
            span = np.arange(n, dtype=np.int64)
            src_idx = (sa.astype(np.int64) - src_ptrs[0])[:, None] + span
            dst_idx = (da.astype(np.int64) - dst_ptrs[0])[:, None] + span
            if dst_mem[dst_idx.ravel()].size:
                prior = dst_mem[dst_idx.ravel()]
                incoming = src_codes[src_idx.ravel()]
                # a byte written twice (replicated prefill heads) must receive the same data both times
                assert ((prior == -1) | (prior == incoming)).all()
            dst_mem[dst_idx.ravel()] = src_codes[src_idx.ravel()]
    # every byte of the request's decode pages holds the same (layer, model head, token) as decode expects,
    # from the prefill page paired with that decode page; the rest of the pool is untouched
    item = dst_lens[0]
    slot = (np.arange(dst_codes.size) % (pool_pages * item)) // item
    sent = np.isin(slot, dp)
    page_map = np.full(pool_pages, -1, dtype=np.int64)
    page_map[list(dp)] = list(sp)
    entry_head_tok = dst_codes - ((dst_codes // 100) % 1000) * 100  # drop the page component
    expected = entry_head_tok + page_map[slot] * 100
    assert (dst_mem[sent] == expected[sent]).all()
    assert (dst_mem[~sent] == -1).all()


def _simple(tp_src=1, tp_dst=4, layers=2, page_size=4, h=8):
    s_item = page_size * heads_on_rank(h, tp_src) * 128
    d_item = page_size * heads_on_rank(h, tp_dst) * 128
    src = ([1000 + i * 10**6 for i in range(2 * layers)], [s_item] * (2 * layers))
    dst = ([5000 + i * 10**6 for i in range(2 * layers)], [d_item] * (2 * layers))
    return src, dst


def _call(src, dst, pages=(0, 1), dpages=(2, 3), **kw):
    args = {"page_size": 4, "src_tp": 1, "src_rank": 0, "dst_tp": 4, "dst_rank": 1, "total_kv_heads": 8}
    args.update(kw)
    return head_slice_blocks(src[0], src[1], dst[0], dst[1], list(pages), list(dpages), **args)


def test_known_addresses_gpt_oss_like():
    src, dst = _simple()
    blocks = _call(src, dst)
    sa, da, n = blocks[0]
    head_len = 128  # item_len // (page_size * heads_on_rank)
    assert n == 2 * head_len
    # decode rank 1 owns heads 2..3: source offset 2 heads into every token row of 8 heads
    assert int(sa[0]) == 1000 + 0 * src[1][0] + 0 * 8 * head_len + 2 * head_len
    assert int(sa[5]) == 1000 + 1 * src[1][0] + 1 * 8 * head_len + 2 * head_len
    assert int(da[5]) == 5000 + 3 * dst[1][0] + 1 * 2 * head_len
    assert len(sa) == 2 * 4


def test_rejects_pp():
    src, dst = _simple()
    with pytest.raises(HeadSliceError, match="with pipeline parallelism yet"):
        _call(src, dst, pp=2)


@pytest.mark.parametrize("layout", ["hnd", "vectorized_5d"])
def test_rejects_non_nhd(layout):
    src, dst = _simple()
    with pytest.raises(HeadSliceError, match=f"needs the NHD KV cache layout, got {layout}"):
        _call(src, dst, layout=layout)


def test_rejects_item_lens_not_whole_heads():
    src, dst = _simple()
    bad_dst = (dst[0], [x + 1 for x in dst[1]])
    with pytest.raises(HeadSliceError, match=r"do not split into 8 and 2 heads of 8 total with page_size=4"):
        _call(src, bad_dst)


def test_rejects_page_count_mismatch():
    src, dst = _simple()
    with pytest.raises(HeadSliceError, match=r"page count mismatch: prefill=2, decode=1"):
        _call(src, dst, dpages=(3,))


def test_rejects_unified_envelope():
    src, dst = _simple()
    with pytest.raises(HeadSliceError, match="needs matching per-layer K/V buffers: prefill has 1 entries"):
        head_slice_blocks(src[0][:1], src[1][:1], dst[0][:1], dst[1][:1], [0], [0], page_size=4,
                          src_tp=1, src_rank=0, dst_tp=4, dst_rank=0, total_kv_heads=8)


def test_page_blocks_equal_tp():
    src, dst = _simple(tp_src=2, tp_dst=2)
    blocks = page_blocks(src[0], src[1], dst[0], dst[1], [3, 4], [7, 8])
    sa, da, n = blocks[1]
    assert n == src[1][1]
    assert sa.tolist() == [src[0][1] + 3 * n, src[0][1] + 4 * n]
    assert da.tolist() == [dst[0][1] + 7 * n, dst[0][1] + 8 * n]
    with pytest.raises(HeadSliceError, match="item lengths differ"):
        page_blocks(src[0], src[1], dst[0], [x * 2 for x in dst[1]], [0], [0])


def test_merge_contiguous_like_sglang():
    assert merge_contiguous([1, 2, 3, 7, 8], [4, 5, 9, 10, 11]) == [(1, 4, 2), (3, 9, 1), (7, 10, 2)]
    assert merge_contiguous([], []) == []


def test_8192_tokens_72_entries_give_one_block_per_token_and_entry():
    # gpt-oss-120b, 8192 tokens at page 64: 128 pages x 64 tokens x 72 layer-K/V entries (its speed is
    # measured in benchmarks/bench_cli.py)
    layers, ps, pages = 36, 64, 128
    src_item, dst_item = ps * 8 * 128, ps * 2 * 128
    src = [i * 10**9 for i in range(2 * layers)]
    dst = [i * 10**9 for i in range(2 * layers)]
    pg = np.arange(pages)
    blocks = head_slice_blocks(src, [src_item] * 72, dst, [dst_item] * 72, pg, pg, page_size=ps,
                               src_tp=1, src_rank=0, dst_tp=4, dst_rank=3, total_kv_heads=8)
    assert sum(len(b[0]) for b in blocks) == 8192 * 72
    assert all(length == 2 * 128 for _, _, length in blocks)  # decode rank 3 of TP4 owns 2 of 8 heads
