"""One point's numbers, read from the load generator's result document, and checked against what was sent.

Why check: pdctl is a validation tool, and a benchmark that silently measured something else (requests that
failed, prompts of another length, answers cut short) must not read as a clean number. With the native
/generate API the tool sends token ids and the server reports each request's prompt and completion tokens, so
the counts must match the sweep EXACTLY: completed + errors = requests, input tokens = isl x completed, output
tokens = osl x completed (EOS is ignored). Percentiles must be ordered and TTFT <= E2E. And the point must have
measured what it says (pdctl.bench.serve.sanity): tokens generated, the concurrency reached, a warm-up sent
first, and the servers' own counters in agreement.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from pdctl.bench.serve.sanity import sanity_problems
from pdctl.bench.serve.sweep import Point

PCTS = ("p50", "p90", "p99")
LATENCIES = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms")
_TOOL_KEYS = {"ttft_ms": "ttft_ms", "itl_ms": "itl_ms", "tpot_ms": "tpot_ms", "e2e_ms": "e2e_latency_ms"}
_TOOL_PCT = {"p50": "median", "p90": "p90", "p99": "p99", "mean": "mean"}


@dataclass
class PointMetrics:
    """What one deployment did at one point."""

    point: Point
    completed: int = 0
    errors: int = 0
    duration_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    request_throughput: float = 0.0
    input_tok_s: float = 0.0
    output_tok_s: float = 0.0
    gpus: int | None = None
    latency: dict[str, dict[str, float]] = field(default_factory=dict)  # "ttft_ms" -> {"p50", "p90", "p99", "mean"}
    problems: list[str] = field(default_factory=list)  # counts or orderings that do not add up
    error_samples: list[str] = field(default_factory=list)
    client: dict[str, Any] | None = None  # the driver's count: warm-up sent, peak in flight (sglang_driver.py)
    server: dict[str, Any] | None = None  # the servers' own counters over the point (servercounts)
    bottleneck: dict[str, Any] | None = None  # what limited the level (levelwatch; pdctl.metrics.bottleneck)
    tokenless: int = 0  # completed requests that never received a token (TTFT 0: the tool then reports osl)

    @property
    def ok(self) -> bool:
        return self.errors == 0 and not self.problems

    def per_gpu(self, value: float) -> float | None:
        return value / self.gpus if self.gpus else None

    @property
    def input_tok_s_per_gpu(self) -> float | None:
        return self.per_gpu(self.input_tok_s)

    @property
    def output_tok_s_per_gpu(self) -> float | None:
        return self.per_gpu(self.output_tok_s)

    def value(self, metric: str) -> float | None:
        """A metric by its gate name: `output_tok_s`, `request_throughput`, `input_tok_s`, `ttft_ms.p50`, ..."""
        if "." in metric:
            group, pct = metric.split(".", 1)
            return self.latency.get(group, {}).get(pct)
        found = getattr(self, metric, None)
        return float(found) if isinstance(found, (int, float)) else None

    def document(self) -> dict[str, Any]:
        """The per-deployment keys of a point in the JSON document (CLI.md)."""
        doc: dict[str, Any] = {
            "requests": self.point.requests, "completed": self.completed, "errors": self.errors,
            "request_throughput": self.request_throughput, "input_tok_s": self.input_tok_s,
            "output_tok_s": self.output_tok_s, "input_tok_s_per_gpu": self.input_tok_s_per_gpu,
            "output_tok_s_per_gpu": self.output_tok_s_per_gpu, "gpus": self.gpus,
            "input_tokens": self.input_tokens, "output_tokens": self.output_tokens, "duration_s": self.duration_s,
            "problems": list(self.problems), "error_samples": list(self.error_samples),
            "client": self.client, "server": self.server, "bottleneck": self.bottleneck, "tokenless": self.tokenless,
        }
        for name in LATENCIES:
            doc[name] = dict(self.latency.get(name, {}))
        return doc


def _num(doc: dict[str, Any], key: str) -> float:
    value = doc.get(key)
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else math.nan


def from_tool_result(point: Point, result: dict[str, Any] | None, *, exact_counts: bool, gpus: int | None,
                     failure: str | None = None, client: dict[str, Any] | None = None,
                     server: dict[str, Any] | None = None) -> PointMetrics:
    """PointMetrics from the tool's result document of POINT (None: the tool produced none, e.g. every request
    failed; FAILURE says why). EXACT_COUNTS: the API reports token counts from the server (native /generate).
    CLIENT: what the driver counted around the tool's requests; SERVER: the servers' counters over the point."""
    m = PointMetrics(point=point, gpus=gpus, client=client, server=server)
    if result is None:
        m.errors = point.requests
        m.error_samples = [failure or "the tool wrote no result for this point"]
        return m
    errors = [e for e in result.get("errors") or [] if e]
    m.completed = int(result.get("completed") or 0)
    m.errors = len(errors)  # requests sent and failed (requests never sent are a problem, below)
    m.error_samples = list(dict.fromkeys(e.strip().splitlines()[-1][:300] for e in errors))[:3]
    m.duration_s = _num(result, "duration")
    in_lens = [int(n) for n, e in zip(result.get("input_lens") or [], result.get("errors") or []) if not e]
    out_lens = [int(n) for n, e in zip(result.get("output_lens") or [], result.get("errors") or []) if not e]
    m.tokenless = sum(1 for t, e in zip(result.get("ttfts") or [], result.get("errors") or []) if not e and not t)
    m.input_tokens = sum(in_lens) if in_lens else int(result.get("total_input_tokens") or 0)
    m.output_tokens = sum(out_lens) if out_lens else int(result.get("total_output_tokens") or 0)
    m.request_throughput = _num(result, "request_throughput")
    m.input_tok_s = m.input_tokens / m.duration_s if m.duration_s > 0 else math.nan
    m.output_tok_s = m.output_tokens / m.duration_s if m.duration_s > 0 else math.nan
    for name, tool_name in _TOOL_KEYS.items():
        m.latency[name] = {pct: _num(result, f"{_TOOL_PCT[pct]}_{tool_name}") for pct in (*PCTS, "mean")}
    m.problems = check(m, exact_counts=exact_counts, sent=len(result.get("errors") or []))
    m.problems += sanity_problems(m, exact=exact_counts)
    return m


def check(m: PointMetrics, *, exact_counts: bool, sent: int) -> list[str]:
    """What does not add up in M (empty = consistent)."""
    p = m.point
    problems: list[str] = []
    if sent != p.requests:
        problems.append(f"the tool reports {sent} requests, {p.requests} were asked for")
    if m.completed + m.errors != p.requests:
        problems.append(f"completed {m.completed} + errors {m.errors} != {p.requests} requests")
    if exact_counts and m.completed:
        if m.input_tokens != p.isl * m.completed:
            problems.append(f"input tokens {m.input_tokens} != {p.isl} x {m.completed} completed")
        if m.output_tokens != p.osl * m.completed:
            problems.append(f"output tokens {m.output_tokens} != {p.osl} x {m.completed} completed")
    if m.completed:
        for name in ("ttft_ms", "e2e_ms") + (("itl_ms", "tpot_ms") if p.osl > 1 else ()):
            values = [m.latency[name][pct] for pct in PCTS]
            if any(not math.isfinite(v) or v < 0 for v in values):
                problems.append(f"{name} percentiles are not finite non-negative numbers: {values}")
            elif not values[0] <= values[1] <= values[2]:
                problems.append(f"{name} percentiles are not ordered: {values}")
        if not m.latency["ttft_ms"]["p50"] <= m.latency["e2e_ms"]["p50"]:
            problems.append("median TTFT exceeds median E2E latency")
    return problems
