"""A finished `pdctl bench serve` run: both sides' points, ratios, the gate, and the JSON document (CLI.md)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.bench.serve.compare import GateFailure, ratios
from pdctl.bench.serve.metrics import PointMetrics
from pdctl.bench.serve.prediction import compare
from pdctl.bench.serve.sweep import SweepSpec
from pdctl.bench.serve.targets import Side


@dataclass
class BenchResult:
    """Everything measured, and the verdict."""

    tool: str
    spec: SweepSpec
    dataset: str
    candidate: Side
    points: list[PointMetrics]
    control: Side | None = None
    control_points: list[PointMetrics] | None = None
    max_regression: float | None = None
    gate_metrics: tuple[str, ...] = ()
    gate_failures: list[GateFailure] = field(default_factory=list)
    predicted: Any = None  # the candidate topology's bench.predicted (pdctl suggest --out), if any

    def pairs(self) -> list[tuple[PointMetrics, PointMetrics]]:
        """(candidate, control) per point; empty without a control."""
        return list(zip(self.points, self.control_points or []))

    @property
    def errors(self) -> int:
        return sum(m.errors for m in [*self.points, *(self.control_points or [])])

    @property
    def problems(self) -> list[str]:
        """Inconsistent counts or orderings, per side and point."""
        out = []
        for side, points in (("candidate", self.points), ("control", self.control_points or [])):
            for m in points:
                out += [f"{side} c={m.point.concurrency} isl={m.point.isl} osl={m.point.osl}: {p}" for p in m.problems]
        return out

    @property
    def ok(self) -> bool:
        """No request failed, every count adds up, and the gate (if any) passed."""
        return self.errors == 0 and not self.problems and not self.gate_failures

    def document(self) -> dict[str, Any]:
        points = []
        ctrl = self.control_points or [None] * len(self.points)
        for cand, con in zip(self.points, ctrl):
            doc = {"concurrency": cand.point.concurrency, "isl": cand.point.isl, "osl": cand.point.osl,
                   **cand.document(),
                   "control": con.document() if con is not None else None,
                   "ratio": ratios(cand, con) if con is not None else None}
            points.append(doc)
        return {
            "ok": self.ok, "tool": self.tool, "points": points,
            "candidate": self.candidate.document(),
            "control": self.control.document() if self.control else None,
            "sweep": {"concurrency": list(self.spec.concurrency), "isl": list(self.spec.isl),
                      "osl": list(self.spec.osl), "dataset": self.dataset, "warmup": self.spec.warmup,
                      "seed": self.spec.seed, "api": self.spec.api, "request_rate": self.spec.request_rate,
                      "num_prompts": self.spec.num_prompts},
            "gate": {"max_regression": self.max_regression, "metrics": list(self.gate_metrics),
                     "failures": [f.document() for f in self.gate_failures]},
            "errors": self.errors, "problems": self.problems,
            "prediction": self.prediction(),
        }

    def prediction(self) -> dict[str, Any] | None:
        """Predicted against measured at the predicted point (pdctl.bench.serve.prediction), or None."""
        return compare(self.predicted, self.points)
