"""Per-mode results, their noise floor and verdict, and the --json document.

The verdict (pdctl.parity.floor): a comparison that passes the kit's check (same tokens, |Δ| within the
tolerance everywhere) never fails a run; a failure nothing can explain (an error, a short answer, no prefix
reuse where one was expected) always does; any other failure is explained by the mode's measured noise
floor when its divergence score is within `factor` x the floor, and fails the run otherwise. Without a floor
(`--no-control`) the issue-7/12 rules hold: cold failures fail, warm/concurrent failures are explained only
by `prefill_differs` for prompts whose cold comparison passed in the same run. A floor that lacks a control the
comparison needs (pdctl.parity.calibration) turns a failure it leaves unexplained into "not calibrated" unless
it is gross: the verdict is then NOT CALIBRATED (exit 3), never FAILED for want of a control.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pdctl.parity.calibration import Calibration
from pdctl.parity.compare import Comparison
from pdctl.parity.floor import STATISTIC, Floor, explain, verdict_numbers


def _finite(value: float | None) -> float | None:
    """JSON has no Infinity: a delta that could not be measured (missing logprob) is written as null."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


@dataclass
class ModeResult:
    """All comparisons of one mode, and the floor measured under the same conditions."""

    name: str
    comparisons: list[Comparison] = field(default_factory=list)
    floor: Floor | None = None  # None = no control run for this mode (--no-control)
    calibration: Calibration | None = None  # None: no floor, or nothing said about it (calibrated)

    @property
    def control(self) -> list[Comparison] | None:
        return self.floor.comparisons if self.floor is not None else None

    @property
    def control_floor(self) -> float | None:
        """The largest |Δ logprob| the controls showed (None without a control)."""
        return self.floor.max_abs_delta if self.floor is not None else None

    def explain(self, vouched: Collection[int] = ()) -> None:
        """Mark each failure with what explains it (VOUCHED: prompts whose cold comparison passed)."""
        explain(self.comparisons, self.floor, mode=self.name, vouched=vouched)
        if self.calibration is not None and self.floor is not None:
            self.calibration.judge(self.comparisons)

    @property
    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.passed]

    @property
    def unexplained(self) -> list[Comparison]:
        """Failures: nothing explains them, and a missing control could not have (see `uncalibrated`)."""
        return [c for c in self.failures if c.explained_by is None and not c.uncalibrated]

    @property
    def uncalibrated(self) -> list[Comparison]:
        """Beyond the floor measured, but within what a control the floor lacks might explain."""
        return [c for c in self.failures if c.uncalibrated]

    @property
    def ok(self) -> bool:
        return not self.unexplained and not self.uncalibrated

    @property
    def verdict(self) -> str:
        return "FAILED" if self.unexplained else ("NOT CALIBRATED" if self.uncalibrated else "OK")

    def numbers(self) -> dict[str, Any]:
        return verdict_numbers(self.comparisons, self.floor)

    def document(self) -> dict[str, Any]:
        """This mode's part of the --json document (CLI.md: compared, passed, failures)."""
        numbers = self.numbers()
        doc: dict[str, Any] = {
            "compared": len(self.comparisons),
            "passed": sum(c.passed for c in self.comparisons),
            "failures": [_clean(c.failure_doc()) for c in self.failures],
            "ok": self.ok,
            "verdict": self.verdict,
            "unexplained": len(self.unexplained),
            "uncalibrated": len(self.uncalibrated),
            "explained": len(self.failures) - len(self.unexplained) - len(self.uncalibrated),
            "max_abs_delta": _finite(max((c.max_abs_delta for c in self.comparisons), default=0.0)),
            "cached_tokens": [c.cached_tokens for c in self.comparisons],
            "statistic": {"worst": numbers["worst"], "ratio": _finite(numbers["ratio"]),
                          "summary": numbers["summary"]},
            "margin": _finite(numbers["margin"]),
            "resyncs": sum(c.resyncs for c in self.comparisons),
        }
        if self.floor is not None:
            floor = self.floor.document()
            doc["floor"] = floor
            doc["control"] = {  # the pre-floor keys, kept
                "compared": floor["compared"], "passed": floor["passed"], "floor": _finite(floor["max_abs_delta"]),
                "failures": [_clean(c.failure_doc()) for c in self.floor.comparisons if not c.passed],
            }
        return doc


def _clean(doc: dict[str, Any]) -> dict[str, Any]:
    doc["max_abs_delta"] = _finite(doc["max_abs_delta"])
    doc["prefill_max_abs_delta"] = _finite(doc.get("prefill_max_abs_delta"))
    doc["deltas"] = [_finite(d) for d in doc.get("deltas", [])]
    doc["kl"] = [_finite(d) for d in doc.get("kl", [])]
    return doc


@dataclass
class ParityResult:
    """Everything one `pdctl parity` run found; `ok` is the verdict (exit 0 vs 1)."""

    modes: dict[str, ModeResult]
    tolerance: float
    max_new_tokens: int
    candidate: str = ""
    reference: str = ""
    suite: list[dict[str, Any]] = field(default_factory=list)
    facts: str = ""
    candidate_workers: dict[str, list[str]] = field(default_factory=dict)  # prefill/decode behind the URL
    factor: float = 0.0
    tp: dict[str, Any] = field(default_factory=dict)  # TP splits and the TP controls (pdctl.parity.controls)
    numerics: dict[str, Any] = field(default_factory=dict)
    positions: dict[str, Any] = field(default_factory=dict)  # pdctl.parity.positions
    soak: Any = None  # pdctl.parity.soak.SoakResult
    wall_s: float | None = None
    candidate_lock: dict[str, Any] | None = None  # the candidate run's lock.json (pdctl.runs.lock), if launched
    settings_from: str = ""  # where tolerance and max_new_tokens came from (command line, eval.parity, built-in)
    numerics_notes: list[str] = field(default_factory=list)  # what the candidate's numerics are not (run's plan)
    calibration: Calibration | None = None

    @property
    def verdict(self) -> str:
        """OK (exit 0), FAILED (exit 1: a failure no missing control explains) or NOT CALIBRATED (exit 3)."""
        verdicts = [mode.verdict for mode in self.modes.values()]
        if self.soak is not None:
            verdicts.append(self.soak.verdict)
        return next((v for v in ("FAILED", "NOT CALIBRATED") if v in verdicts), "OK")

    @property
    def ok(self) -> bool:
        return self.verdict == "OK"

    @property
    def margin(self) -> float | None:
        """The smallest margin of any mode (None when no mode had anything for a floor to explain)."""
        margins = [m for mode in self.modes.values() if (m := mode.numbers()["margin"]) is not None]
        return min(margins) if margins else None

    def document(self) -> dict[str, Any]:
        """The --json document (keys from CLI.md, plus the floor, statistic, margin and positions)."""
        modes = {name: mode.document() for name, mode in self.modes.items()}
        doc = {
            "ok": self.ok,
            "verdict": self.verdict,
            "calibration": self.calibration.document() if self.calibration is not None else None,
            "modes": modes,
            "tolerance": self.tolerance,
            "max_new_tokens": self.max_new_tokens,
            "settings_from": self.settings_from,
            "floor": {name: m.get("floor") for name, m in modes.items()},
            "statistic": {"name": "score", "definition": STATISTIC, "factor": self.factor},
            "margin": _finite(self.margin),
            "positions": self.positions,
            "candidate": self.candidate,
            "candidate_workers": self.candidate_workers,
            "candidate_lock": self.candidate_lock,
            "reference": self.reference,
            "tp": self.tp,
            "numerics": self.numerics,
            "numerics_notes": self.numerics_notes,
            "prompts": self.suite,
            "suite_facts": self.facts,
        }
        if self.soak is not None:
            doc["soak"] = self.soak.document()
        if self.wall_s is not None:
            doc["wall_s"] = round(self.wall_s, 1)
        return doc
