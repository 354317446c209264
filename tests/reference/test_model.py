"""Exactness of the model and its paged cache, in-process: TP layouts, cache reuse, layouts, determinism."""

from __future__ import annotations

import torch

from tests.support.inprocess import EDGE_PROMPTS, TOK


def _tokens_and_lps(reqs):
    return [(r.output_ids, r.output_logprobs, r.input_logprobs) for r in reqs]


def test_tp2_tp4_match_tp1_on_window_and_page_edges(engine_factory):
    base = engine_factory().generate(EDGE_PROMPTS, max_new_tokens=40)
    for prompt, r in zip(EDGE_PROMPTS, base):
        assert len(TOK.encode(prompt)) + 40 > 32, "every case must cross the window"
    for tp in ("2", "4"):
        got = engine_factory("--tp", tp).generate(EDGE_PROMPTS, max_new_tokens=40)
        for b, g in zip(base, got):
            assert g.output_ids == b.output_ids, f"tp{tp} tokens differ"
            diffs = [abs(x - y) for x, y in zip(g.output_logprobs, b.output_logprobs)]
            diffs += [abs(x - y) for x, y in zip(g.input_logprobs[1:], b.input_logprobs[1:])]
            assert max(diffs) < 1e-4, f"tp{tp} logprob diff {max(diffs)}"


def test_tp_larger_than_kv_heads_replicates_heads(engine_factory):
    base = engine_factory().generate(EDGE_PROMPTS[:1], max_new_tokens=20)[0]
    eng = engine_factory("--tp", "16")
    assert [s.kv_heads for s in eng.engine.model.shards] == [1] * 16
    assert [s.kv_start for s in eng.engine.model.shards] == [r // 2 for r in range(16)]
    got = eng.generate(EDGE_PROMPTS[:1], max_new_tokens=20)[0]
    assert got.output_ids == base.output_ids
    assert max(abs(a - b) for a, b in zip(got.output_logprobs, base.output_logprobs)) < 1e-4


def test_reruns_and_batching_are_bit_identical(engine_factory):
    eng = engine_factory("--disable-radix-cache")
    alone = [eng.generate([p], max_new_tokens=30)[0] for p in EDGE_PROMPTS]
    batched = eng.generate(EDGE_PROMPTS, max_new_tokens=30)
    assert _tokens_and_lps(alone) == _tokens_and_lps(batched)
    again = eng.generate(EDGE_PROMPTS, max_new_tokens=30)
    assert _tokens_and_lps(again) == _tokens_and_lps(batched)


def test_cold_and_warm_prefix_cache_are_identical(engine_factory):
    eng = engine_factory()
    prompt = EDGE_PROMPTS[3]
    cold = eng.generate([prompt], max_new_tokens=30, logprob_start_len=-1)[0]
    warm = eng.generate([prompt], max_new_tokens=30, logprob_start_len=-1)[0]
    assert cold.cached_tokens == 0
    assert warm.cached_tokens == (len(cold.input_ids) - 1) // 16 * 16 > 32
    assert (warm.output_ids, warm.output_logprobs) == (cold.output_ids, cold.output_logprobs)
    # a longer prompt sharing the prefix reuses it too, and equals its own cold run
    longer = prompt + "and more text after it"
    warm2 = eng.generate([longer], max_new_tokens=20, logprob_start_len=-1)[0]
    assert warm2.cached_tokens >= 16
    fresh = engine_factory("--disable-radix-cache").generate([longer], max_new_tokens=20, logprob_start_len=-1)[0]
    assert (warm2.output_ids, warm2.output_logprobs) == (fresh.output_ids, fresh.output_logprobs)


def test_hybrid_swa_memory_off_gives_same_tokens(engine_factory):
    on = engine_factory().generate(EDGE_PROMPTS, max_new_tokens=30)
    off_eng = engine_factory("--disable-hybrid-swa-memory")
    assert off_eng.engine.kv.swa_alloc is None
    assert off_eng.engine.kv.ranks[0].full.layer_ids == [0, 1, 2, 3]
    off = off_eng.generate(EDGE_PROMPTS, max_new_tokens=30)
    assert [r.output_ids for r in on] == [r.output_ids for r in off]


def test_every_layout_gives_the_same_result(engine_factory):
    nhd = engine_factory().generate(EDGE_PROMPTS[:2], max_new_tokens=30)
    for layout in ("hnd", "vectorized_5d"):
        got = engine_factory("--kv-layout", layout).generate(EDGE_PROMPTS[:2], max_new_tokens=30)
        assert _tokens_and_lps(got) == _tokens_and_lps(nhd)


def test_layout_mismatch_changes_the_logits(engine_factory):
    """Write pages as NHD, read them as vectorized_5d: the attention really reads the paged cache."""
    from pdctl.reference.kvcache import SeqPages
    from pdctl.reference.ranks import Segment

    eng = engine_factory("--disable-radix-cache").engine
    eng.scheduler.stop()  # drive the model directly
    ids = TOK.encode(EDGE_PROMPTS[0])

    def logits(read_layout: str) -> torch.Tensor:
        kv = eng.kv
        kv.set_read_layout(read_layout)
        n = -(-len(ids) // kv.page_size)
        seq = SeqPages(kv.full_alloc.alloc(n), kv.swa_alloc.alloc(n))
        try:
            return eng.model.forward([Segment(seq, ids, 0, 0)])[0]
        finally:
            kv.full_alloc.release(seq.full)
            kv.swa_alloc.release(seq.swa)
            kv.set_read_layout("nhd")

    good, bad = logits("nhd"), logits("vectorized_5d")
    assert (good - bad).abs().max() > 1.0
    assert not torch.equal(good.argmax(-1), bad.argmax(-1))


def test_swa_pool_holds_only_the_window(engine_factory):
    eng = engine_factory("--disable-radix-cache")
    kv = eng.engine.kv
    free_before = kv.swa_alloc.free_pages
    seen = []
    orig = eng.engine.scheduler.pages.slide_window

    def spy(seq, seq_len):
        orig(seq, seq_len)
        seen.append(sum(1 for p in seq.swa if p >= 0))

    eng.engine.scheduler.pages.slide_window = spy
    eng.generate([EDGE_PROMPTS[3]], max_new_tokens=60)
    window_pages = 32 // 16 + 1
    assert seen and max(seen) <= window_pages
    assert kv.swa_alloc.free_pages == free_before
    assert kv.full_alloc.free_pages == kv.full_alloc.usable_pages


def test_sampling_with_seed_is_reproducible(engine_factory):
    eng = engine_factory()
    a = eng.generate(EDGE_PROMPTS[:1], max_new_tokens=30, temperature=0.8, seed=7)[0]
    b = eng.generate(EDGE_PROMPTS[:1], max_new_tokens=30, temperature=0.8, seed=7)[0]
    c = eng.generate(EDGE_PROMPTS[:1], max_new_tokens=30, temperature=5.0, seed=8)[0]
    assert a.output_ids == b.output_ids
    assert c.output_ids != a.output_ids


def test_requests_beyond_kv_capacity_queue_and_all_succeed(engine_factory):
    """8 requests needing 5 pages each on a 16-page pool: admission control queues them, none fails."""
    prompts = [f"queued request {i}: " + "y" * 20 for i in range(8)]
    free = engine_factory().generate(prompts, max_new_tokens=40)
    tight = engine_factory("--max-total-tokens", "256").generate(prompts, max_new_tokens=40)
    assert [r.output_ids for r in tight] == [r.output_ids for r in free]


def test_prefix_cache_without_hybrid_swa_memory(engine_factory):
    """The full-cache control (`--disable-hybrid-swa-memory`): a warm resend is served from the prefix cache
    and equals the cold answer (it used to crash in the prefix cache's SWA bookkeeping)."""
    eng = engine_factory("--disable-hybrid-swa-memory")
    prompt = EDGE_PROMPTS[3]
    cold = eng.generate([prompt], max_new_tokens=20, logprob_start_len=-1)[0]
    warm = eng.generate([prompt], max_new_tokens=20, logprob_start_len=-1)[0]
    assert warm.cached_tokens == (len(cold.input_ids) - 1) // 16 * 16 > 32
    assert (warm.output_ids, warm.output_logprobs) == (cold.output_ids, cold.output_logprobs)
