"""Candidate vs control: ratios per point, and the regression gate (`--max-regression P` on chosen metrics).

A ratio is candidate / control. A regression is how much worse the candidate is, in percent of the control:
for throughputs (higher is better) (control - candidate) / control, for latencies (lower is better)
(candidate - control) / control. The gate fails when any chosen metric regresses by more than P at any point,
or when a point cannot be compared (a side has errors or no number): a gate that cannot look must not pass.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from pdctl.bench.serve.metrics import LATENCIES, PCTS, PointMetrics
from pdctl.errors import UserError

THROUGHPUTS = ("request_throughput", "input_tok_s", "output_tok_s", "input_tok_s_per_gpu", "output_tok_s_per_gpu")
GATE_METRICS = THROUGHPUTS + tuple(f"{lat}.{pct}" for lat in LATENCIES for pct in (*PCTS, "mean"))


def higher_is_better(metric: str) -> bool:
    return metric in THROUGHPUTS


def parse_metrics(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """`output_tok_s,ttft_ms.p50` -> a tuple; UserError naming the choices for an unknown one."""
    names = [m.strip() for m in (text.split(",") if isinstance(text, str) else text) if m.strip()]
    if not names:
        raise UserError("--gate-metrics: name at least one metric")
    for name in names:
        if name not in GATE_METRICS:
            raise UserError(f"--gate-metrics: unknown metric {name!r}; choose from {', '.join(GATE_METRICS)}")
    return tuple(dict.fromkeys(names))


def parse_percent(text: str | float | None) -> float | None:
    """`5%`, `5` or 5.0 -> 5.0; None stays None; UserError for anything else or a negative number."""
    if text is None:
        return None
    raw = str(text).strip().removesuffix("%")
    try:
        value = float(raw)
    except ValueError:
        raise UserError(f"--max-regression: expected a percentage like 5%, got {text!r}") from None
    if not math.isfinite(value) or value < 0:
        raise UserError(f"--max-regression: expected a non-negative percentage, got {text!r}")
    return value


def _ratio(cand: float | None, ctrl: float | None) -> float | None:
    if cand is None or ctrl is None or not (math.isfinite(cand) and math.isfinite(ctrl)) or ctrl == 0:
        return None
    return cand / ctrl


def ratio_of(metric: str, cand: PointMetrics, ctrl: PointMetrics) -> float | None:
    """candidate / control of METRIC (None where either is missing or the control is 0)."""
    return _ratio(cand.value(metric), ctrl.value(metric))


def ratios(cand: PointMetrics, ctrl: PointMetrics) -> dict[str, Any]:
    """candidate / control for every throughput and latency percentile (None where undefined)."""
    doc: dict[str, Any] = {m: _ratio(cand.value(m), ctrl.value(m)) for m in THROUGHPUTS}
    for lat in LATENCIES:
        doc[lat] = {pct: _ratio(cand.value(f"{lat}.{pct}"), ctrl.value(f"{lat}.{pct}")) for pct in (*PCTS, "mean")}
    return doc


def regression(metric: str, cand: PointMetrics, ctrl: PointMetrics) -> float | None:
    """How much worse the candidate is on METRIC, in percent of the control (negative = better)."""
    r = ratio_of(metric, cand, ctrl)
    if r is None:
        return None
    return (1.0 - r) * 100.0 if higher_is_better(metric) else (r - 1.0) * 100.0


@dataclass(frozen=True)
class GateFailure:
    """One reason the gate failed."""

    concurrency: int
    isl: int
    osl: int
    metric: str
    regression_pct: float | None  # None: the point could not be compared
    message: str

    def document(self) -> dict[str, Any]:
        return {"concurrency": self.concurrency, "isl": self.isl, "osl": self.osl, "metric": self.metric,
                "regression_pct": self.regression_pct, "message": self.message}


def gate(pairs: list[tuple[PointMetrics, PointMetrics]], metrics: tuple[str, ...], max_regression: float
         ) -> list[GateFailure]:
    """Every (point, metric) whose regression exceeds MAX_REGRESSION percent, or that cannot be compared."""
    failures: list[GateFailure] = []
    for cand, ctrl in pairs:
        p = cand.point
        broken = [side for side, m in (("candidate", cand), ("control", ctrl)) if not m.ok]
        if broken:
            failures.append(GateFailure(p.concurrency, p.isl, p.osl, "*", None,
                                        f"cannot compare: {' and '.join(broken)} had errors or inconsistent counts"))
            continue
        for metric in metrics:
            reg = regression(metric, cand, ctrl)
            if reg is None:
                failures.append(GateFailure(p.concurrency, p.isl, p.osl, metric, None,
                                            f"{metric}: no number to compare"))
            elif reg > max_regression:
                failures.append(GateFailure(p.concurrency, p.isl, p.osl, metric, reg,
                                            f"{metric} regressed {reg:.1f}% (> {max_regression:g}%): candidate "
                                            f"{cand.value(metric):.4g} vs control {ctrl.value(metric):.4g}"))
    return failures
