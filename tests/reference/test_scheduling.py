"""The scheduler SGLang's way: chunked prefill interleaved with decode steps, and retraction under KV pressure."""

from __future__ import annotations

import threading

from pdctl.reference.chunks import chunk_end
from pdctl.reference.request import GenRequest
from pdctl.reference.sampling import SamplingParams
from tests.support.inprocess import EDGE_PROMPTS, TOK


def _lps(reqs):
    return [(r.output_ids, r.output_logprobs, r.input_logprobs) for r in reqs]


def test_chunk_end_is_page_aligned_and_one_chunked_prompt_at_a_time():
    assert chunk_end(0, 100, 4096, 16, allow_chunk=True) == 100  # fits: the whole prompt
    assert chunk_end(0, 100, 40, 16, allow_chunk=True) == 32  # cut at the last page boundary within budget
    assert chunk_end(32, 100, 40, 16, allow_chunk=True) == 64
    assert chunk_end(64, 100, 40, 16, allow_chunk=True) == 100  # the last chunk: the rest
    assert chunk_end(0, 100, 40, 16, allow_chunk=False) is None  # another prompt is being chunked
    assert chunk_end(0, 100, 10, 16, allow_chunk=True) is None  # less than a page of budget left


def test_chunked_prefill_equals_whole_prefill(engine_factory):
    """A prompt cut into 32-token chunks gives the same tokens and logprobs (input and output) as in one go."""
    long_prompt = EDGE_PROMPTS[3]  # 283 tokens: nine chunks
    whole = engine_factory("--chunked-prefill-size", "-1").generate([long_prompt, EDGE_PROMPTS[0]], 20)
    chunked_eng = engine_factory("--chunked-prefill-size", "32")
    chunked = chunked_eng.generate([long_prompt, EDGE_PROMPTS[0]], 20)
    assert _lps(chunked) == _lps(whole)
    assert len(chunked[0].input_logprobs) == len(chunked[0].input_ids)  # every prompt position, across chunks
    assert chunked_eng.engine.scheduler.steps >= 9 + 19


def test_long_prompt_chunks_interleave_with_decode_steps(engine_factory):
    """While a long prompt is prefilled chunk by chunk, a running request keeps getting tokens every step."""
    eng = engine_factory("--chunked-prefill-size", "32")
    sched = eng.engine.scheduler
    token_steps: dict[str, list[int]] = {"short": [], "long": []}
    done = threading.Event()
    finished = []

    def make(rid, text, n):
        return GenRequest(rid=rid, input_ids=TOK.encode(text), sampling=SamplingParams(max_new_tokens=n, temperature=0,
                          ignore_eos=True), on_progress=lambda r: token_steps[r.rid].append(sched.steps),
                          on_done=lambda r: (finished.append(r), len(finished) == 2 and done.set()))

    short = make("short", "hi", 12)
    sched.submit(short)
    sched.submit(make("long", EDGE_PROMPTS[3] * 2, 2))  # 565 tokens: 18 chunks
    assert done.wait(120)
    assert all(r.error is None for r in finished)
    long_first = token_steps["long"][0] if token_steps["long"] else sched.steps
    during = [s for s in token_steps["short"] if s < long_first]
    assert len(during) >= 8, (token_steps, long_first)  # decode steps ran between the long prompt's chunks


def test_retraction_requeues_and_every_request_finishes_as_without_pressure(engine_factory):
    """A pool too small for every request's whole output: admission is optimistic (new_token_ratio), decode
    runs out of pages, the scheduler retracts requests and re-queues them (their KV is recomputed) instead of
    failing them; every answer equals the one given with plenty of memory."""
    prompts = [f"request {i} asks for a long answer: " for i in range(6)]
    free = engine_factory().generate(prompts, max_new_tokens=120)
    tight_eng = engine_factory("--max-total-tokens", "384")
    tight = tight_eng.generate(prompts, max_new_tokens=120)
    stats = tight_eng.engine.scheduler.stats()
    assert stats["num_retracted_reqs"] > 0, stats
    assert [r.output_ids for r in tight] == [r.output_ids for r in free]
    for a, b in zip(tight, free):
        assert max(abs(x - y) for x, y in zip(a.output_logprobs, b.output_logprobs)) <= 1e-4
    kv = tight_eng.engine.kv
    assert kv.full_alloc.free_pages + stats["cached_pages"] == kv.full_alloc.usable_pages  # nothing leaked
