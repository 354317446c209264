"""PD through the REAL sglang-router over NIXL: TP2 -> TP1, TP1 -> TP2, TP1 -> TP4 (8 KV heads), hybrid SWA,
page 16; the layout handshake rule and what happens without it; /flush_cache fan-out.

Deployments are shared: one prefill TP2 serves three decodes (NHD; vectorized_5d; vectorized_5d with the
handshake checks skipped), one prefill TP1 serves decode TP2 and TP4, each pair behind its own router.
"""

from __future__ import annotations

import pytest
import requests

from tests.support.pd import start_shared_prefill
from tests.support.pd_answers import PROMPTS, assert_same, body, generate

pytestmark = pytest.mark.e2e
LAYOUT_MSG = "Head-sliced PD transfer needs the NHD KV cache layout, got vectorized_5d"


@pytest.fixture(scope="module")
def p2(ref_checkpoint, tmp_path_factory):
    """Prefill TP2 with decodes: TP1 NHD, TP1 vectorized_5d, TP1 vectorized_5d + unsafe skip."""
    with start_shared_prefill(
        ref_checkpoint,
        2,
        {
            "nhd": (1, []),
            "v5d": (1, ["--kv-layout", "vectorized_5d"]),
            "v5d_unsafe": (
                1,
                ["--kv-layout", "vectorized_5d", "--unsafe-skip-handshake-checks", "--transfer-timeout", "3"],
            ),
        },
        {"nhd", "v5d_unsafe"},
        tmp_path_factory.mktemp("p2"),
    ) as routers:
        yield routers


PREFILL_CAPACITY = 512  # p1's prefill --max-total-tokens: a longer prompt is rejected there, not on decode
PREFILL_CONTEXT = 1024  # p1's prefill --context-length (decode keeps the model's 4096)


@pytest.fixture(scope="module")
def p1(ref_checkpoint, tmp_path_factory):
    """Prefill TP1 (small KV capacity) with decodes TP2 and TP4 (default capacity, 30 s transfer timeout)."""
    with start_shared_prefill(
        ref_checkpoint,
        1,
        {"d2": (2, []), "d4": (4, [])},
        {"d2", "d4"},
        tmp_path_factory.mktemp("p1"),
        prefill_args=["--max-total-tokens", str(PREFILL_CAPACITY), "--context-length", str(PREFILL_CONTEXT)],
    ) as routers:
        yield routers


def test_tp2_to_tp1_matches_colocated(p2, colocated_answers):
    for prompt in PROMPTS:
        assert_same(generate(p2["nhd"], prompt), colocated_answers[prompt], f"TP2->TP1 {prompt[:20]!r}")


@pytest.mark.parametrize("decode", ["d2", "d4"])
def test_tp1_to_wider_decode_matches_colocated(p1, colocated_answers, decode):
    for prompt in PROMPTS:
        assert_same(generate(p1[decode], prompt), colocated_answers[prompt], f"TP1->{decode} {prompt[:20]!r}")


def test_vectorized_5d_decode_is_rejected_with_sglangs_message(p2):
    r = requests.post(p2["v5d"] + "/generate", json=body(PROMPTS[0]), timeout=60)
    assert r.status_code != 200
    assert LAYOUT_MSG in r.text


def test_without_the_handshake_guard_the_output_is_wrong(p2, colocated_answers):
    diffs = 0
    for prompt in PROMPTS:
        got = generate(p2["v5d_unsafe"], prompt)
        diffs += got["output_ids"] != colocated_answers[prompt]["output_ids"]
    assert diffs == len(PROMPTS), "NHD head slices written into vectorized_5d pages must corrupt every answer"


def test_flush_cache_through_router(p2, colocated_answers):
    generate(p2["nhd"], PROMPTS[2])  # warm the prefill's prefix cache
    r = requests.post(p2["nhd"] + "/flush_cache", timeout=30)
    assert r.status_code == 200, r.text
    assert_same(generate(p2["nhd"], PROMPTS[2]), colocated_answers[PROMPTS[2]], "after flush")


def test_decode_gives_up_on_a_room_after_the_transfer_timeout(p2):
    """A room the prefill never serves (it never got the request): decode answers with an error, no hang."""
    req = body(PROMPTS[0]) | {
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": int(p2["boot"]),
        "bootstrap_room": 4242424242,
    }
    r = requests.post(p2["v5d_unsafe:server"] + "/generate", json=req, timeout=120)
    assert r.status_code != 200
    assert "timed out after 3s" in r.text, r.text  # decode's own --transfer-timeout 3 fired
    # Decode told the prefill to abort the room: the prefill's own request for it fails with DECODE's
    # message (it never writes into pages decode has freed); without the abort it would fail with its own
    # 30 s timeout's message instead.
    r = requests.post(p2["prefill"] + "/generate", json=req | {"return_logprob": False}, timeout=120)
    assert r.status_code != 200
    assert "timed out after 3s" in r.text, r.text


def test_decode_reports_the_prefills_cached_tokens(p2):
    """SGLang's decode reports prefill's prefix-cache hit: the second identical request (decode's own cache
    flushed in between) says cached_tokens > 0 and answers with the same tokens and logprobs."""
    prompt = PROMPTS[2] * 2
    req = body(prompt) | {"logprob_start_len": -1}  # input logprobs would disable prefill's prefix match
    first = requests.post(p2["nhd"] + "/generate", json=req, timeout=60).json()
    r = requests.post(p2["nhd:server"] + "/flush_cache", timeout=30)  # decode only; prefill keeps its cache
    assert r.status_code == 200, r.text
    second = requests.post(p2["nhd"] + "/generate", json=req, timeout=60).json()
    cached = second["meta_info"]["cached_tokens"]
    assert 0 < cached < len(prompt.encode()), second["meta_info"]
    assert cached % 16 == 0, cached  # whole pages of the prefill's prefix cache
    assert second["output_ids"] == first["output_ids"]
    want = first["meta_info"]["output_token_logprobs"]
    got = second["meta_info"]["output_token_logprobs"]
    assert [t[1] for t in got] == [t[1] for t in want]
    assert all(abs(a[0] - b[0]) <= 1e-4 for a, b in zip(got, want)), (got, want)


@pytest.mark.parametrize(
    ("prompt_len", "reason"),
    [
        # Past prefill's KV capacity, within its context: the scheduler fails the request (admission OOM).
        (PREFILL_CAPACITY + 100, "out of memory"),
        # Past prefill's context length: its HTTP layer refuses the request before the scheduler sees it.
        (PREFILL_CONTEXT + 50, "context length"),
    ],
    ids=["scheduler-oom", "http-validation"],
)
def test_prefill_rejection_reaches_decode_fast(p1, prompt_len, reason):
    """A prompt prefill rejects but decode would accept: decode hears of it at once (room aborted) and the
    client's error arrives well before decode's 30 s --transfer-timeout; both decodes keep serving."""
    prompt = "x" * prompt_len
    r = requests.post(p1["d2"] + "/generate", json=body(prompt, max_new=2), timeout=120)
    assert r.status_code != 200, r.text
    # The prefill's reason, not decode's transfer timeout: decode heard of the rejection (room aborted).
    assert reason in r.text and "timed out" not in r.text, r.text
    assert_same(generate(p1["d2"], PROMPTS[0]), generate(p1["d4"], PROMPTS[0]), "after a rejected request")


def test_streaming_through_the_pd_router(p2, colocated_answers):
    """stream: true through the real sglang-router in PD mode: decode's per-token events reach the client."""
    import json

    prompt = PROMPTS[0]
    events = []
    with requests.post(p2["nhd"] + "/generate", json=body(prompt) | {"stream": True}, timeout=60, stream=True) as r:
        assert r.status_code == 200, r.text
        for line in r.iter_lines(decode_unicode=True):
            if line.startswith("data: "):
                events.append(line[len("data: "):])
    assert events[-1] == "[DONE]"
    docs = [json.loads(e) for e in events[:-1]]
    want = colocated_answers[prompt]
    assert [d["meta_info"]["completion_tokens"] for d in docs] == list(range(1, len(want["output_ids"]) + 1))
    assert docs[-1]["output_ids"] == want["output_ids"] and docs[-1]["text"] == want["text"]
    chunks = []
    with requests.post(p2["nhd"] + "/v1/chat/completions", stream=True, timeout=60, json={
            "model": "x", "messages": [{"role": "user", "content": prompt}], "max_tokens": 8, "temperature": 0,
            "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True}}) as r:
        assert r.status_code == 200, r.text
        chunks = [line[6:] for line in r.iter_lines(decode_unicode=True) if line.startswith("data: ")]
    assert chunks[-1] == "[DONE]" and json.loads(chunks[-2])["usage"]["completion_tokens"] == 8
    assert sum(1 for c in chunks[:-2] if json.loads(c)["choices"][0]["delta"].get("content")) >= 1
