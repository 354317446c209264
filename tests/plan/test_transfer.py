"""Descriptor/byte counts of a request: windows, paths (page / head-slice / MLA), totals add up."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pdctl.models import PRESETS
from pdctl.plan import (
    dtype_bytes,
    full_pages,
    head_slice_blocks,
    heads_on_rank,
    merge_contiguous,
    page_blocks,
    plan_transfer,
    prefill_peers,
    swa_window_pages,
)


def test_swa_window_pages_like_sglang():
    # window_start = max(prefix, len - window), page-aligned down; pages up to ceil(len / page)
    assert swa_window_pages(8192, 0, 128, 64) == range(126, 128)
    assert swa_window_pages(100, 0, 32, 16) == range(4, 7)
    assert swa_window_pages(10, 0, 128, 64) == range(1)
    assert swa_window_pages(200, 190, 32, 16) == range(11, 13)
    assert swa_window_pages(0, 0, 32, 16) == range(0)
    assert full_pages(8192, 0, 64) == range(128)
    assert full_pages(100, 40, 16) == range(2, 7)
    with pytest.raises(ValueError):
        swa_window_pages(10, 0, 32, 0)


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5000), st.integers(0, 5000), st.sampled_from([1, 16, 64]), st.sampled_from([32, 128]))
def test_window_covers_exactly_the_needed_tokens(n, prefix, ps, window):
    prefix = min(prefix, n)
    pages = swa_window_pages(n, prefix, window, ps)
    need_from = max(prefix, n - window)
    if need_from < n:
        assert pages.start * ps <= need_from < (pages.start + 1) * ps
        assert pages.stop * ps >= n > (pages.stop - 1) * ps


def _blocks_total(spec, p, d, ps, n_pages, layers):
    """Descriptors and bytes from really building the blocks (all layers of one kind), summed over pairs."""
    head_len = spec.head_dim * 2
    desc = nbytes = 0
    for dr in range(d):
        for pr in prefill_peers(p, d, dr):
            si = ps * heads_on_rank(spec.num_kv_heads, p) * head_len
            di = ps * heads_on_rank(spec.num_kv_heads, d) * head_len
            ptrs = [i * 10**9 for i in range(2 * layers)]
            pages = list(range(n_pages))
            if p == d:  # whole pages; SGLang merges each contiguous run into one descriptor per layer K/V
                blocks = page_blocks(ptrs, [si] * 2 * layers, ptrs, [di] * 2 * layers, pages, pages)
                runs = len(merge_contiguous(pages, pages))
                desc += runs * len(blocks)
                nbytes += sum(len(b[0]) * b[2] for b in blocks)
                continue
            else:
                blocks = head_slice_blocks(ptrs, [si] * 2 * layers, ptrs, [di] * 2 * layers, pages, pages,
                                           page_size=ps, src_tp=p, src_rank=pr, dst_tp=d, dst_rank=dr,
                                           total_kv_heads=spec.num_kv_heads)
            desc += sum(len(b[0]) for b in blocks)
            nbytes += sum(len(b[0]) * b[2] for b in blocks)
    return desc, nbytes


@pytest.mark.parametrize("p,d", [(1, 4), (4, 1), (2, 2), (2, 1), (1, 16), (16, 2)])
def test_plan_counts_equal_built_blocks(p, d):
    spec = PRESETS["reference-tiny"]
    tokens, ps = 100, 16
    plan = plan_transfer(spec, tokens=tokens, prefill_tp=p, decode_tp=d, page_size=ps)
    assert plan.path == ("page" if p == d else "head-slice") and plan.sends == 1
    fd, fb = _blocks_total(spec, p, d, ps, len(full_pages(tokens, 0, ps)), len(spec.full_layers))
    sd, sb = _blocks_total(spec, p, d, ps, len(swa_window_pages(tokens, 0, 32, ps)), len(spec.swa_layers))
    assert sum(x.full_descriptors for x in plan.pairs) == fd
    assert sum(x.full_bytes for x in plan.pairs) == fb
    assert sum(x.swa_descriptors for x in plan.pairs) == sd
    assert sum(x.swa_bytes for x in plan.pairs) == sb
    assert plan.total_bytes == fb + sb


def test_gpt_oss_120b_p1_d4_numbers():
    spec = PRESETS["gpt-oss-120b"]
    plan = plan_transfer(spec, tokens=8192, prefill_tp=1, decode_tp=4, page_size=64)
    assert (plan.full_layers, plan.swa_layers, plan.full_pages, plan.swa_pages) == (18, 18, 128, 2)
    pair = plan.pairs[0]
    assert pair.full_descriptors == 128 * 64 * 18 * 2
    assert pair.swa_descriptors == 2 * 64 * 18 * 2
    assert pair.full_bytes == pair.full_descriptors * 2 * 64 * 2  # 2 heads x head_dim 64 x bf16
    # the 4 decode ranks together receive exactly one copy of the prompt's full-attention KV
    kv_full = 8192 * 18 * 2 * 8 * 64 * 2
    assert sum(x.full_bytes for x in plan.pairs) == kv_full


def test_disabled_swa_memory_sends_all_layers_full():
    spec = PRESETS["gpt-oss-20b"]
    plan = plan_transfer(spec, tokens=1000, prefill_tp=2, decode_tp=1, page_size=64, hybrid_swa_memory=False)
    assert plan.swa_layers == 0 and plan.full_layers == 24 and plan.swa_pages == 0


def test_mla_one_sender_latent_bytes():
    spec = PRESETS["deepseek-v3"]
    plan = plan_transfer(spec, tokens=1024, prefill_tp=8, decode_tp=4, page_size=64, kv_cache_dtype="fp8_e4m3")
    assert plan.path == "mla" and plan.dtype_bytes == 1
    senders = [x for x in plan.pairs if x.descriptors]
    assert len(senders) == 4  # one real sender per decode rank; the other peers send dummies
    assert senders[0].full_bytes == 1024 * 61 * (512 + 64)


def test_dtype_bytes():
    assert dtype_bytes("auto") == 2 and dtype_bytes("fp8_e5m2") == 1 and dtype_bytes("mxfp8") == 1
    assert dtype_bytes(None) == 2


def test_plan_rejects_bad():
    with pytest.raises(ValueError):
        plan_transfer(PRESETS["llama-3.1-8b"], tokens=0, prefill_tp=1, decode_tp=1, page_size=16)
    with pytest.raises(ValueError):
        plan_transfer(PRESETS["llama-3.1-8b"], tokens=10, prefill_tp=2, decode_tp=3, page_size=16)


def test_to_dict_totals():
    plan = plan_transfer(PRESETS["llama-3.1-8b"], tokens=8192, prefill_tp=4, decode_tp=2, page_size=64)
    d = plan.to_dict()
    assert d["total_bytes"] == sum(x["bytes"] for x in d["pairs"])
    assert {"src_head_start", "num_heads", "dst_head_start", "full_descriptors", "swa_bytes"} <= set(d["pairs"][0])


def test_transfer_plan_from_topologies():
    from pathlib import Path

    from pdctl.models import resolve_model_spec
    from pdctl.plan import transfer_plan
    from pdctl.topology import load_topology

    root = Path(__file__).resolve().parents[2] / "configs"
    topo = load_topology(root / "local-cpu.yaml")  # reference engine: float32 KV for "auto"
    plan = transfer_plan(topo, resolve_model_spec(topo.model), 100)
    assert plan.dtype_bytes == 4 and plan.path == "head-slice" and plan.page_size == 16
    assert [(p.prefill_rank, p.decode_rank) for p in plan.pairs] == [(0, 0), (1, 0)]
    topo = load_topology(root / "gpt-oss-120b-p1-d4-gb300-nixl.yaml")
    plan = transfer_plan(topo, resolve_model_spec(topo.model), 8192)
    assert plan.dtype_bytes == 2 and plan.total_descriptors == 4 * (128 * 64 * 18 * 2 + 2 * 64 * 18 * 2)


def test_sends_follow_chunked_prefill():
    from pdctl.plan.windows import send_chunks

    assert send_chunks(100, 0, 16, None) == [range(7)]
    assert send_chunks(100, 0, 16, 40) == [range(2), range(2, 5), range(5, 7)]  # full pages at 40, 80
    assert send_chunks(8192, 0, 64, 8192) == [range(128)]
    assert send_chunks(20000, 4096, 64, 8192) == [range(64, 192), range(192, 313)]
    assert send_chunks(10, 10, 16, 8) == [range(1)]  # the page holding the prefix end goes again
    assert send_chunks(0, 0, 16, 8) == []


def test_equal_tp_counts_one_merged_descriptor_per_layer_kv_per_send():
    spec = PRESETS["llama-3.1-8b"]
    plan = plan_transfer(spec, tokens=20000, prefill_tp=2, decode_tp=2, page_size=64, chunk_tokens=8192)
    assert plan.sends == 3 and plan.pairs[0].full_descriptors == 3 * 32 * 2
    one = plan_transfer(spec, tokens=20000, prefill_tp=2, decode_tp=2, page_size=64, chunk_tokens=-1)
    assert one.sends == 1 and one.pairs[0].full_bytes == plan.pairs[0].full_bytes


def test_staging_is_one_bulk_write_per_writer_per_send():
    spec = PRESETS["gpt-oss-120b"]
    plain = plan_transfer(spec, tokens=20000, prefill_tp=4, decode_tp=1, page_size=64)
    staged = plan_transfer(spec, tokens=20000, prefill_tp=4, decode_tp=1, page_size=64, staging=True)
    assert staged.path == "staging" and staged.sends == 3
    for a, b in zip(plain.pairs, staged.pairs):
        assert b.full_descriptors == 3 and b.full_bytes == a.full_bytes  # same bytes, bulk
        assert b.swa_descriptors == a.swa_descriptors  # the SWA window still goes per token
    equal = plan_transfer(spec, tokens=20000, prefill_tp=4, decode_tp=4, page_size=64, staging=True)
    assert equal.path == "page"  # SGLang stages only unequal-TP sends
