"""Head ownership equals SGLang's compute_head_slice_params and rank mapping, over every valid combination."""

from __future__ import annotations

import pytest

from pdctl.plan import (
    decode_peers,
    global_head,
    head_slice_params,
    heads_on_rank,
    ownership_map,
    prefill_peers,
    ratio_ok,
)
from tests.support.sglang_transcription import sglang_head_slice, sglang_target_ranks

HEADS = [1, 2, 3, 4, 6, 8, 12, 16, 32, 64, 128]
TPS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64]


def valid_combos():
    """(H, p, d) where both attention TPs hold whole/replicated heads and one TP divides the other."""
    for h in HEADS:
        for p in TPS:
            for d in TPS:
                if (h % p == 0 or p % h == 0) and (h % d == 0 or d % h == 0) and ratio_ok(p, d):
                    yield h, p, d


COMBOS = list(valid_combos())


def test_enough_combinations():
    assert len(COMBOS) > 500


def test_params_equal_transcription_and_heads_land_right():
    checked = 0
    for h, p, d in COMBOS:
        for dr in range(d):
            peers = prefill_peers(p, d, dr)
            assert peers == sglang_target_ranks(p, d, dr)
            written = [0] * heads_on_rank(h, d)
            for pr in peers:
                hs = head_slice_params(p, d, pr, dr, h)
                assert (hs.src_head_start, hs.num_heads, hs.dst_head_start) == sglang_head_slice(p, d, pr, dr, h)
                for i in range(hs.num_heads):
                    # the head read on prefill is the same model head as the one written on decode
                    assert global_head(h, p, pr, hs.src_head_start + i) == global_head(h, d, dr, hs.dst_head_start + i)
                    written[hs.dst_head_start + i] += 1
                checked += 1
            # every decode head is written; more than once only when prefill replicates heads (p > H)
            expected = (p // d) * heads_on_rank(h, p) // heads_on_rank(h, d) if p > d else 1
            assert written == [expected] * len(written), (h, p, d, dr, written)
            assert expected == 1 or p > h
    assert checked > 5000


def test_replication_example_tp_above_heads():
    # 8 KV heads, prefill TP 1 -> decode TP 16: pairs of decode ranks share a head
    starts = [head_slice_params(1, 16, 0, dr, 8).src_head_start for dr in range(16)]
    assert starts == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7]
    assert heads_on_rank(8, 16) == 1


def test_decode_peers_inverse():
    for h, p, d in COMBOS[:300]:
        for pr in range(p):
            for dr in decode_peers(p, d, pr):
                assert pr in prefill_peers(p, d, dr)


def test_ownership_map_gpt_oss_p1_d4():
    rows = ownership_map(1, 4, 8)
    assert [r["global_heads"] for r in rows] == [[0, 2], [2, 4], [4, 6], [6, 8]]
    assert [r["sources"][0]["src_head_start"] for r in rows] == [0, 2, 4, 6]


@pytest.mark.parametrize("bad", [0, -1])
def test_rejects_nonpositive(bad):
    with pytest.raises(ValueError):
        heads_on_rank(8, bad)
    with pytest.raises(ValueError):
        head_slice_params(bad, 2, 0, 0, 8)
