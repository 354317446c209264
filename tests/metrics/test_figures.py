"""The interval maths of `pdctl status`: rates from counter differences, percentiles from histogram bucket
differences (Prometheus' histogram_quantile), counter resets; over real prometheus-client output."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from pdctl.metrics import names as N
from pdctl.metrics.figures import bucket_increase, buckets, increase, quantile, router_figures
from pdctl.metrics.scrape import parse

BOUNDS = (0.1, 0.2, 0.4, 0.8, 1.6)
ROUTER_TEXT = (Path(__file__).parents[1] / "data" / "router-0.3.2-metrics.txt").read_text()


def histogram_scrape(values: list[float], at: float = 0.0, hist: Histogram | None = None):
    """A real prometheus-client histogram holding VALUES, scraped through the text format."""
    registry = CollectorRegistry()
    hist = Histogram("lat_seconds", "latency", buckets=BOUNDS, registry=registry)
    for v in values:
        hist.observe(v)
    return parse(generate_latest(registry).decode(), at)


def empirical_bucket(values: list[float], q: float) -> tuple[float, float]:
    """(lower, upper] bounds of the bucket that holds the exact q-quantile of VALUES (rank ceil(q*n))."""
    ordered = sorted(values)
    target = ordered[max(0, math.ceil(q * len(ordered) - 1e-9) - 1)]  # 0.9 x 10 is rank 9, not 10
    lower = 0.0
    for bound in (*BOUNDS, math.inf):
        if target <= bound:
            return lower, bound
        lower = bound
    raise AssertionError("unreachable")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(min_value=0.001, max_value=3.0), min_size=1, max_size=60),
       st.sampled_from([0.5, 0.9, 0.99]))
@example([0.05, 0.05, 0.05, 0.15, 0.15, 0.15], 0.5)  # interpolated to 0.10000000000000002 before the clamp
@example([0.05] * 9 + [0.15], 0.9)  # 0.9 x 10 = 9.000000000000002 once slipped into the next bucket
def test_quantile_lies_in_the_bucket_of_the_true_quantile(values: list[float], q: float) -> None:
    estimate = quantile(q, buckets(histogram_scrape(values), "lat_seconds"))
    lower, upper = empirical_bucket(values, q)
    assert estimate is not None
    if math.isinf(upper):  # beyond the last bound the histogram can only say "at least the last bound"
        assert estimate == BOUNDS[-1]
    else:
        assert lower <= estimate <= upper


def test_quantile_interpolates_like_prometheus() -> None:
    # 10 observations in (0.1, 0.2]: the median is half way through that bucket
    assert quantile(0.5, [(0.1, 0.0), (0.2, 10.0), (math.inf, 10.0)]) == pytest.approx(0.15)
    # the first bucket interpolates from zero
    assert quantile(0.5, [(0.1, 4.0), (math.inf, 4.0)]) == pytest.approx(0.05)
    assert quantile(0.5, [(0.1, 0.0), (math.inf, 0.0)]) is None
    assert quantile(0.5, None) is None


@settings(max_examples=100, deadline=None)
@given(st.lists(st.floats(min_value=0.001, max_value=3.0), max_size=30),
       st.lists(st.floats(min_value=0.001, max_value=3.0), min_size=1, max_size=30))
def test_interval_buckets_are_those_of_the_new_observations(before: list[float], after: list[float]) -> None:
    registry = CollectorRegistry()
    hist = Histogram("lat_seconds", "latency", buckets=BOUNDS, registry=registry)
    for v in before:
        hist.observe(v)
    first = parse(generate_latest(registry).decode(), 0.0)
    for v in after:
        hist.observe(v)
    second = parse(generate_latest(registry).decode(), 1.0)
    window = bucket_increase(buckets(second, "lat_seconds"), buckets(first, "lat_seconds"))
    assert window == buckets(histogram_scrape(after), "lat_seconds")


def test_a_restarted_process_counts_from_zero() -> None:
    assert increase(15.0, 10.0) == 5.0
    assert increase(3.0, 10.0) == 3.0  # reset: the new process's count is the increase
    assert increase(None, 10.0) is None and increase(4.0, None) == 4.0
    old, new = buckets(histogram_scrape([0.15] * 8), "lat_seconds"), buckets(histogram_scrape([0.3]), "lat_seconds")
    assert bucket_increase(new, old) == new


def test_router_figures_from_sglang_router_output() -> None:
    scrape = parse(ROUTER_TEXT, 10.0)
    routed = sum(v for _, v in scrape.series(N.ROUTER_REQUESTS_ROUTED))
    fig = router_figures(scrape)
    assert fig["totals"]["requests"] == routed == 4 and fig["errors"] == 0
    assert fig["e2e_ms"]["count"] == 4 and 0 < fig["e2e_ms"]["p50"] <= fig["e2e_ms"]["p99"]
    assert fig["ttft_ms"] is None  # HTTP PD mode: the router records no TTFT
    decode = {labels["worker"] for labels, _ in scrape.series(N.ROUTER_ACTIVE)}.pop()
    assert router_figures(scrape, workers={decode})["running"] == 0


def test_router_rates_and_errors_over_an_interval() -> None:
    first = parse(ROUTER_TEXT, 10.0)
    errors = ('# TYPE smg_router_request_errors_total counter\n'
              'smg_router_request_errors_total{endpoint="generate",error_type="validation_error"} 2\n')
    grown = ROUTER_TEXT.replace('streaming="false"} 2', 'streaming="false"} 12') + errors
    fig = router_figures(parse(grown, 12.0), first)
    assert fig["requests_per_s"] == pytest.approx(5.0) and fig["errors"] == 2 and fig["window"] == "interval"


def test_parse_refuses_what_is_not_prometheus_text() -> None:
    with pytest.raises(ValueError, match="not Prometheus text"):
        parse("<html>hello</html>\n", 0.0)
