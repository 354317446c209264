"""The KV term of a candidate: SGLang's bytes and descriptors (pdctl.plan), the slowest rank, the link's load."""

from __future__ import annotations

import pytest

from pdctl.models.presets import PRESETS
from pdctl.suggest.kv import KvModel, KvShape
from pdctl.suggest.link import Link, unlimited

SPEC = PRESETS["gpt-oss-120b"]
LINK = Link(gbps=10.0, us_per_descriptor=0.5, source="test")


def test_head_slice_pair_counts_sglangs_descriptors_and_prices_the_slowest_rank() -> None:
    # docs/plan.md's example: gpt-oss-120b, prefill TP1 -> decode TP4, 8192 tokens, page 64, bf16:
    # 1,198,080 descriptors, 292 MiB, all posted by the one prefill rank
    term = KvModel(KvShape(SPEC, 8192), LINK).term(1, 4, prefill_rate=2.0, decode_rate=1.0)
    assert term is not None and term.path == "head-slice"
    assert term.descriptors == 1_198_080 and round(term.bytes / 2**20) == 292
    assert (term.rank_bytes, term.rank_descriptors) == (term.bytes, term.descriptors)
    seconds = term.bytes / 10e9 + term.descriptors * 0.5e-6
    assert term.transfer_ms == pytest.approx(seconds * 1e3)
    assert term.link_load == pytest.approx(2.0 * seconds)  # 2 requests/s on that prefill rank


def test_equal_tp_moves_whole_pages_in_few_descriptors() -> None:
    kv = KvModel(KvShape(SPEC, 8192), LINK)
    page = kv.term(1, 1, prefill_rate=1.0, decode_rate=1.0)
    hetero = kv.term(1, 2, prefill_rate=1.0, decode_rate=1.0)
    assert page.path == "page" and page.descriptors == 72 and page.bytes == hetero.bytes
    assert page.transfer_ms < hetero.transfer_ms  # same bytes, 72 descriptors instead of ~600k


def test_prefill_wider_than_decode_splits_the_bytes_over_prefill_ranks_and_the_decode_rank_receives_all() -> None:
    kv = KvModel(KvShape(SPEC, 8192), Link(gbps=1.0, us_per_descriptor=0.0, source="test"))
    term = kv.term(4, 1, prefill_rate=1.0, decode_rate=3.0)
    assert term.rank_bytes * 4 == term.bytes  # each prefill rank sends its 2 heads
    # the one decode rank receives everything over its link: that is the slowest side
    assert term.transfer_ms == pytest.approx(term.bytes / 1e9 * 1e3)
    assert term.link_load == pytest.approx(3.0 * term.bytes / 1e9)


def test_staging_and_fp8_change_what_moves() -> None:
    staged = KvModel(KvShape(SPEC, 8192, staging=True), LINK).term(1, 4, prefill_rate=1.0, decode_rate=1.0)
    fp8 = KvModel(KvShape(SPEC, 8192, kv_cache_dtype="fp8_e4m3"), LINK).term(1, 4, prefill_rate=1.0,
                                                                             decode_rate=1.0)
    plain = KvModel(KvShape(SPEC, 8192), LINK).term(1, 4, prefill_rate=1.0, decode_rate=1.0)
    assert staged.path == "staging" and staged.descriptors < plain.descriptors / 50
    assert fp8.bytes * 2 == plain.bytes


def test_no_term_where_no_transfer_exists_and_none_on_an_unlimited_link() -> None:
    assert KvModel(KvShape(SPEC, 8192), LINK).term(2, 3, prefill_rate=1.0, decode_rate=1.0) is None
    free = KvModel(KvShape(SPEC, 8192), unlimited()).term(1, 4, prefill_rate=9.0, decode_rate=9.0)
    assert free.transfer_ms == 0.0 and free.link_load == 0.0
