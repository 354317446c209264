"""PD through the REAL sglang-router over NIXL: TP2 -> TP1, TP1 -> TP2, TP1 -> TP4 (8 KV heads), hybrid SWA,
page 16; the layout handshake rule and what happens without it; /flush_cache fan-out.

Deployments are shared: one prefill TP2 serves three decodes (NHD; vectorized_5d; vectorized_5d with the
handshake checks skipped), one prefill TP1 serves decode TP2 and TP4, each pair behind its own router.
"""

from __future__ import annotations

import time

import pytest
import requests

from tests.support.pd import start_shared_prefill
from tests.transfer.conftest import PROMPTS, assert_same, body

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
                ["--kv-layout", "vectorized_5d", "--unsafe-skip-handshake-checks", "--transfer-timeout", "5"],
            ),
        },
        {"nhd", "v5d_unsafe"},
        tmp_path_factory.mktemp("p2"),
    ) as routers:
        yield routers


@pytest.fixture(scope="module")
def p1(ref_checkpoint, tmp_path_factory):
    """Prefill TP1 with decodes TP2 and TP4."""
    with start_shared_prefill(
        ref_checkpoint, 1, {"d2": (2, []), "d4": (4, [])}, {"d2", "d4"}, tmp_path_factory.mktemp("p1")
    ) as routers:
        yield routers


def _run(url: str, prompt: str) -> dict:
    r = requests.post(url + "/generate", json=body(prompt), timeout=60)
    assert r.status_code == 200, r.text
    return r.json()


def test_tp2_to_tp1_matches_colocated(p2, colocated_answers):
    for prompt in PROMPTS:
        assert_same(_run(p2["nhd"], prompt), colocated_answers[prompt], f"TP2->TP1 {prompt[:20]!r}")


@pytest.mark.parametrize("decode", ["d2", "d4"])
def test_tp1_to_wider_decode_matches_colocated(p1, colocated_answers, decode):
    for prompt in PROMPTS:
        assert_same(_run(p1[decode], prompt), colocated_answers[prompt], f"TP1->{decode} {prompt[:20]!r}")


def test_vectorized_5d_decode_is_rejected_with_sglangs_message(p2):
    r = requests.post(p2["v5d"] + "/generate", json=body(PROMPTS[0]), timeout=60)
    assert r.status_code != 200
    assert LAYOUT_MSG in r.text


def test_without_the_handshake_guard_the_output_is_wrong(p2, colocated_answers):
    diffs = 0
    for prompt in PROMPTS:
        got = _run(p2["v5d_unsafe"], prompt)
        diffs += got["output_ids"] != colocated_answers[prompt]["output_ids"]
    assert diffs == len(PROMPTS), "NHD head slices written into vectorized_5d pages must corrupt every answer"


def test_flush_cache_through_router(p2, colocated_answers):
    _run(p2["nhd"], PROMPTS[2])  # warm the prefill's prefix cache
    r = requests.post(p2["nhd"] + "/flush_cache", timeout=30)
    assert r.status_code == 200, r.text
    assert_same(_run(p2["nhd"], PROMPTS[2]), colocated_answers[PROMPTS[2]], "after flush")


def test_decode_gives_up_on_a_room_after_the_transfer_timeout(p2):
    """A room the prefill never serves (it never got the request): decode answers with an error, no hang."""
    req = body(PROMPTS[0]) | {
        "bootstrap_host": "127.0.0.1",
        "bootstrap_port": int(p2["boot"]),
        "bootstrap_room": 4242424242,
    }
    t0 = time.monotonic()
    r = requests.post(p2["v5d_unsafe:server"] + "/generate", json=req, timeout=60)
    elapsed = time.monotonic() - t0
    assert r.status_code != 200
    assert "timed out after 5s" in r.text, r.text
    assert 4.5 <= elapsed < 15, elapsed
