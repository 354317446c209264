"""The colocated TP1 reference answers every PD run is held to, and how PD answers are compared with them."""

from __future__ import annotations

from typing import Any

import pytest
import requests

from tests.support.servers import start_reference_server

# Prompts crossing the sliding window (32 tokens in the default checkpoint) and several 16-token pages.
PROMPTS = [
    "The quick brown fox jumps over the lazy dog; pack my box.",
    "Prefill and decode run on different machines, and the KV cache moves between them by head slices. " * 1,
    (
        "In the beginning the Universe was created. This has made a lot of people very angry and been widely "
        "regarded as a bad move. Many races believe that it was created by some sort of god."
    ),
]
MAX_NEW = 10
TOL = 1e-4


def body(prompt: str, max_new: int = MAX_NEW) -> dict[str, Any]:
    """A greedy /generate body asking for input and output logprobs (+ top-2)."""
    return {
        "text": prompt,
        "sampling_params": {"max_new_tokens": max_new, "temperature": 0, "ignore_eos": True},
        "return_logprob": True,
        "logprob_start_len": 0,
        "top_logprobs_num": 2,
    }


def generate(url: str, prompt: str, max_new: int = MAX_NEW) -> dict[str, Any]:
    """POST `body(prompt)` to URL's /generate; the answer must be 200 (its text is the failure message)."""
    r = requests.post(url + "/generate", json=body(prompt, max_new), timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


@pytest.fixture(scope="session")
def colocated_answers(ref_checkpoint) -> dict[str, dict[str, Any]]:
    """Colocated TP1 answers for PROMPTS (one server, started once per session)."""
    with start_reference_server(ref_checkpoint, tp=1) as srv:
        return {p: generate(srv.url, p) for p in PROMPTS}


def assert_same(got: dict[str, Any], want: dict[str, Any], label: str) -> None:
    """Greedy tokens identical; input and output logprobs (and top-k ids) within TOL."""
    assert got["output_ids"] == want["output_ids"], (
        f"{label}: tokens differ: {got['text']!r} vs {want['text']!r}"
    )
    gm, wm = got["meta_info"], want["meta_info"]
    for key in ("input_token_logprobs", "output_token_logprobs"):
        assert len(gm[key]) == len(wm[key]), f"{label}: {key} has {len(gm[key])} entries, want {len(wm[key])}"
        for i, (a, b) in enumerate(zip(gm[key], wm[key])):
            assert a[1] == b[1], f"{label}: {key}[{i}] token {a[1]} != {b[1]}"
            if a[0] is None or b[0] is None:
                assert a[0] is None and b[0] is None, f"{label}: {key}[{i}] {a[0]} vs {b[0]}"
            else:
                assert abs(a[0] - b[0]) <= TOL, f"{label}: {key}[{i}] logprob {a[0]} vs {b[0]}"
    assert [[t[1] for t in top] for top in gm["output_top_logprobs"]] == [
        [t[1] for t in top] for top in wm["output_top_logprobs"]
    ], f"{label}: top logprob ids differ"
