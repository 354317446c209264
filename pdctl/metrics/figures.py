"""The figures `pdctl status` shows, computed from scrapes: pure functions, no I/O.

Rates are counter differences between two scrapes divided by the time between them; latency percentiles
come from the difference of the histograms' cumulative buckets between the scrapes (what happened in the
interval, not since start), interpolated within a bucket the way Prometheus' histogram_quantile does.
Without a previous scrape (a one-shot `pdctl status`) there are no rates, and percentiles cover the
process's whole life. A counter that went down (the process restarted) counts from zero, as in Prometheus.

Series are summed over their labels (is_streaming, tp/dp ranks, router endpoints); usage ratios take the
largest (the fullest rank is the one that stalls).
"""

from __future__ import annotations

import math
from typing import Any

from pdctl.metrics import names as N
from pdctl.metrics.scrape import Scrape

Buckets = list[tuple[float, float]]  # (upper bound `le`, cumulative count), ascending, +Inf last


def total(scrape: Scrape, name: str, **match: str) -> float | None:
    """Sum of every series of NAME (matching MATCH); None when the scrape has no such sample."""
    series = scrape.series(name, **match)
    return sum(v for _, v in series) if series else None


def largest(scrape: Scrape, name: str) -> float | None:
    """The largest value of NAME over its series; None when absent."""
    series = scrape.series(name)
    return max(v for _, v in series) if series else None


def buckets(scrape: Scrape, name: str) -> Buckets | None:
    """Cumulative buckets of histogram NAME (without the `_bucket` suffix), summed over its series."""
    series = scrape.series(name + "_bucket")
    if not series:
        return None
    sums: dict[float, float] = {}
    for labels, value in series:
        le = float(labels.get("le", "+Inf"))
        sums[le] = sums.get(le, 0.0) + value
    return sorted(sums.items())


def increase(cur: float | None, prev: float | None) -> float | None:
    """How much a counter grew between two scrapes (a reset counts from zero); None when unknown."""
    if cur is None:
        return None
    if prev is None or cur < prev:
        return cur
    return cur - prev


def bucket_increase(cur: Buckets | None, prev: Buckets | None) -> Buckets | None:
    """Per-bound increase of cumulative buckets (a histogram whose count went down restarted: CUR)."""
    if cur is None:
        return None
    if not prev:
        return cur
    before = dict(prev)
    if cur[-1][1] < prev[-1][1]:
        return cur
    return [(le, count - before.get(le, 0.0)) for le, count in cur]


def quantile(q: float, cumulative: Buckets | None) -> float | None:
    """Prometheus' histogram_quantile over cumulative buckets: None without observations; a rank in the
    +Inf bucket answers the largest finite bound (the histogram cannot say more). A rank that equals a bucket's
    count up to float rounding (0.9 x 10 = 9.000000000000002) stays in that bucket, and an estimate never
    leaves its bucket by rounding."""
    if not cumulative or cumulative[-1][1] <= 0:
        return None
    count = cumulative[-1][1]
    rank = q * count
    slack = 1e-9 * count  # float rounding of q x count, far below one observation
    lower, below = 0.0, 0.0
    for le, cum in cumulative:
        if cum >= rank - slack and cum > below:
            if math.isinf(le):
                return lower
            if le <= 0:
                return le
            return min(le, lower + (le - lower) * max(0.0, rank - below) / (cum - below))
        lower, below = (le if not math.isinf(le) else lower), cum
    return lower


def percentiles_ms(cur: Scrape, prev: Scrape | None, name: str, *, scale: float = 1000.0) -> dict[str, float] | None:
    """p50 and p99 (bucket-interpolated) and the exact mean, in milliseconds, of histogram NAME (seconds; SCALE 1
    for a histogram already in ms) over the interval (or lifetime), with the number of observations; None
    without any."""
    window = bucket_increase(buckets(cur, name), buckets(prev, name) if prev else None)
    p50, p99 = quantile(0.5, window), quantile(0.99, window)
    if p50 is None or p99 is None or not window:
        return None
    count = window[-1][1]
    grown = increase(total(cur, name + "_sum"), total(prev, name + "_sum") if prev else None)
    mean = None if grown is None else grown / count
    return {"p50": round(p50 * scale, 3), "p99": round(p99 * scale, 3),
            "mean": None if mean is None else round(mean * scale, 3), "count": int(count)}


def _rate(cur: Scrape, prev: Scrape | None, name: str, **match: str) -> float | None:
    if prev is None or cur.at <= prev.at:
        return None
    grown = increase(total(cur, name, **match), total(prev, name, **match))
    return None if grown is None else round(grown / (cur.at - prev.at), 3)


def _int(value: float | None) -> int | None:
    return None if value is None else round(value)


def engine_figures(cur: Scrape, prev: Scrape | None = None) -> dict[str, Any]:
    """The figures of an SGLang (or reference) server from its /metrics (CLI.md: status `metrics`)."""
    outcomes = {outcome: total(cur, N.KV_TRANSFERS, outcome=outcome) for outcome in ("ok", "failed")}
    sglang_failed = [total(cur, N.BOOTSTRAP_FAILED), total(cur, N.TRANSFER_FAILED)]
    failures = None if all(v is None for v in sglang_failed) else sum(v or 0 for v in sglang_failed)
    prev_failures = None
    if prev is not None:
        before = [total(prev, N.BOOTSTRAP_FAILED), total(prev, N.TRANSFER_FAILED)]
        prev_failures = None if all(v is None for v in before) else sum(v or 0 for v in before)
    transferring = total(cur, N.PREFILL_INFLIGHT)
    if transferring is None:
        transferring = total(cur, N.DECODE_TRANSFER)
    return {
        "kind": "engine",
        "window": "lifetime" if prev is None else "interval",
        "interval_s": None if prev is None else round(cur.at - prev.at, 3),
        "requests_per_s": _rate(cur, prev, N.REQUESTS),
        "prompt_tokens_per_s": _rate(cur, prev, N.PROMPT_TOKENS),
        "generation_tokens_per_s": _rate(cur, prev, N.GENERATION_TOKENS),
        "running": _int(total(cur, N.RUNNING)),
        "queued": _int(total(cur, N.QUEUED)),
        "transferring": _int(transferring),
        "kv_usage": largest(cur, N.TOKEN_USAGE),
        "cache_hit_rate": largest(cur, N.CACHE_HIT_RATE),
        "ttft_ms": percentiles_ms(cur, prev, N.TTFT),
        "itl_ms": percentiles_ms(cur, prev, N.ITL),
        "e2e_ms": percentiles_ms(cur, prev, N.E2E),
        "transfer_failures": _int(increase(failures, prev_failures)) if prev is not None else _int(failures),
        "kv_transfer_ms": percentiles_ms(cur, prev, N.KV_TRANSFER_LATENCY_MS, scale=1.0),
        "retracted": _int(increase(total(cur, N.RETRACTED), total(prev, N.RETRACTED) if prev else None)),
        "totals": {
            "requests": _int(total(cur, N.REQUESTS)),
            "prompt_tokens": _int(total(cur, N.PROMPT_TOKENS)),
            "generation_tokens": _int(total(cur, N.GENERATION_TOKENS)),
            "cached_tokens": _int(total(cur, N.CACHED_TOKENS)),
            "aborted": _int(total(cur, N.ABORTED)),
            "transfers_ok": _int(outcomes["ok"]),
            "transfers_failed": _int(outcomes["failed"]),
            "bootstrap_failed": _int(sglang_failed[0]),
            "transfer_failed": _int(sglang_failed[1]),
            "kv_transfer_bytes": _int(total(cur, N.KV_TRANSFER_BYTES)),
            "retracted": _int(total(cur, N.RETRACTED)),
        },
    }


def router_figures(cur: Scrape, prev: Scrape | None = None, *, workers: set[str] | None = None) -> dict[str, Any]:
    """The figures of sglang-router 0.3.x from its Prometheus port: requests it routed, their end-to-end
    latency, the requests in flight (summed over WORKERS, the decode workers of a PD run: a PD request is
    in flight on a prefill and a decode worker at once; all workers when empty), and errors (routed requests
    that failed: smg_router_request_errors_total — not the router's own 503s to readiness probes, nor input
    it refused before routing). In HTTP PD mode the router records no TTFT or token counts (its gRPC mode
    does): None. Its exporter creates a series at its first event: none yet = 0."""
    errors_now = total(cur, N.ROUTER_ERRORS) or 0
    errors_before = (total(prev, N.ROUTER_ERRORS) or 0) if prev else None
    active = [v for labels, v in cur.series(N.ROUTER_ACTIVE) if not workers or labels.get("worker") in workers]
    return {
        "kind": "router",
        "window": "lifetime" if prev is None else "interval",
        "interval_s": None if prev is None else round(cur.at - prev.at, 3),
        "requests_per_s": _rate(cur, prev, N.ROUTER_REQUESTS_ROUTED),
        "generation_tokens_per_s": _rate(cur, prev, N.ROUTER_TOKENS) if cur.has(N.ROUTER_TOKENS) else None,
        "running": _int(sum(active)) if cur.has(N.ROUTER_ACTIVE) else None,
        "refused": _refused(cur, prev),
        "ttft_ms": percentiles_ms(cur, prev, N.ROUTER_TTFT),
        "e2e_ms": percentiles_ms(cur, prev, N.ROUTER_DURATION),
        "errors": _int(increase(errors_now, errors_before)),
        "totals": {"requests": _int(total(cur, N.ROUTER_REQUESTS_ROUTED) or 0), "errors": _int(errors_now)},
    }



def _refused(cur: Scrape, prev: Scrape | None) -> int | None:
    """Requests the router's limiter did not let through (its rate-limit counter, every result but `allowed`)
    in the interval (lifetime without PREV); None when the router exports no such counter (no limit set)."""
    def not_allowed(scrape: Scrape) -> float | None:
        series = [v for labels, v in scrape.series(N.ROUTER_RATE_LIMIT) if labels.get("result") != "allowed"]
        return sum(series) if scrape.has(N.ROUTER_RATE_LIMIT) else None

    return _int(increase(not_allowed(cur), not_allowed(prev) if prev else None))
