"""The reference engine's metrics object: SGLang's names and meanings per role, one registry per server,
gauges read at scrape time, and the figures status computes from two scrapes of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from pdctl.metrics import names as N
from pdctl.metrics.engine import EngineMetrics, Load
from pdctl.metrics.figures import engine_figures
from pdctl.metrics.scrape import parse


@dataclass
class Req:
    """What the hooks read of a GenRequest."""

    prompt_len: int
    created: float = 0.0
    output_ids: list[int] = field(default_factory=list)
    cached_tokens: int = 0
    error: str | None = None
    on_progress: Any = None
    token_at: float = 0.0


def serve(metrics: EngineMetrics, req: Req, times: list[float]) -> None:
    """REQ gains one output token at each of TIMES, then finishes."""
    for t in times:
        req.output_ids.append(1)
        metrics.token(req, t)
    metrics.finished(req)


def scrape(metrics: EngineMetrics, at: float):
    return parse(metrics.exposition().decode(), at)


def make(role: str, load: Load | None = None) -> EngineMetrics:
    return EngineMetrics(model_name="m", role=role, page_size=16, context_len=4096,
                         load=(lambda: load) if load else None)


def test_counts_and_latencies_of_a_decode_server() -> None:
    m = make("decode")
    first = scrape(m, 0.0)
    serve(m, Req(prompt_len=10, created=0.0, cached_tokens=4), [0.25, 0.255, 0.265])
    serve(m, Req(prompt_len=20, created=0.0, on_progress=print), [0.5, 0.53])
    fig = engine_figures(scrape(m, 2.0), first)
    totals = fig["totals"]
    assert (totals["requests"], totals["prompt_tokens"], totals["generation_tokens"], totals["cached_tokens"]) == (
        2, 30, 5, 4)
    assert fig["requests_per_s"] == pytest.approx(1.0) and fig["prompt_tokens_per_s"] == pytest.approx(15.0)
    assert fig["ttft_ms"]["count"] == 2 and 200 <= fig["ttft_ms"]["p50"] <= fig["ttft_ms"]["p99"] <= 600
    assert fig["itl_ms"]["count"] == 3 and 4 <= fig["itl_ms"]["p50"] <= fig["itl_ms"]["p99"] <= 40
    streaming = scrape(m, 2.0).series(N.REQUESTS, is_streaming="true")
    assert [v for _, v in streaming] == [1.0]


def test_a_prefill_server_observes_no_ttft_or_itl() -> None:
    m = make("prefill")
    serve(m, Req(prompt_len=10), [0.1])
    fig = engine_figures(scrape(m, 1.0))
    assert fig["ttft_ms"] is None and fig["itl_ms"] is None
    assert fig["totals"]["requests"] == 1 and fig["e2e_ms"]["count"] == 1


def test_transfers_ok_failed_and_bytes() -> None:
    m = make("prefill")
    m.transfer_done(3 * 1024 * 1024, 0.003)
    m.transfer_done(1024, 0.001)
    m.transfer_failed(bootstrap=True)
    m.transfer_failed()
    s = scrape(m, 1.0)
    totals = engine_figures(s)["totals"]
    assert (totals["transfers_ok"], totals["transfers_failed"]) == (2, 2)
    assert (totals["bootstrap_failed"], totals["transfer_failed"]) == (1, 1)
    assert totals["kv_transfer_bytes"] == 3 * 1024 * 1024 + 1024
    assert s.series(N.KV_TRANSFER_TOTAL_MB + "_sum")[0][1] == pytest.approx(3 + 1 / 1024)
    assert s.series(N.KV_TRANSFER_LATENCY_MS + "_count")[0][1] == 2
    assert engine_figures(s)["transfer_failures"] == 2


def test_gauges_are_read_at_scrape_time() -> None:
    load = Load(running=3, queued=2, transferring=1, full_capacity=1000, full_used=250, full_available=700,
                full_evictable=50, swa_capacity=100, swa_used=60, swa_available=40, swa_evictable=0)
    m = make("decode", load)
    m.admitted(30, 40)
    m.admitted(0, 60)
    fig = engine_figures(scrape(m, 1.0))
    assert (fig["running"], fig["queued"], fig["transferring"]) == (3, 2, 1)
    assert fig["kv_usage"] == pytest.approx(0.6)  # SGLang: the fuller of the full and SWA pools
    assert fig["cache_hit_rate"] == pytest.approx(0.3)
    s = scrape(m, 1.0)
    assert s.series(N.FULL_TOKEN_USAGE)[0][1] == pytest.approx(0.25)
    assert s.series(N.DECODE_TRANSFER)[0][1] == 1 and not s.has(N.PREFILL_INFLIGHT)
    labels = s.series(N.RUNNING)[0][0]
    assert labels == {"model_name": "m", "engine_type": "decode", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}


def test_each_server_has_its_own_registry() -> None:
    a, b = make("colocated"), make("colocated")
    serve(a, Req(prompt_len=5), [0.1])
    assert engine_figures(scrape(a, 1.0))["totals"]["requests"] == 1
    assert engine_figures(scrape(b, 1.0))["totals"]["requests"] == 0
    assert scrape(a, 1.0).series(N.RUNNING) == []  # no load source: no made-up gauges
