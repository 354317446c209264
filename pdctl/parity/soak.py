"""`pdctl parity --soak N`: the suite sent round after round under concurrency, divergence over time.

Why: some PD faults need traffic to appear — pages reused after eviction, a pool that fills up, a counter
that wraps — so a deployment that passes one round can drift later (sglang#23020: GPQA from 95% to 50% after
~100 requests on mixed GPUs). A soak round is the concurrent procedure (the suite x `--copies` at once,
scored on the reference's cold answers) without flushing between rounds, so the server's state carries on.

The soak fails when a round has a comparison beyond the concurrent floor's threshold (or one no noise
explains, e.g. an error), or when the divergence *grows* with served requests: a one-sided Mann-Kendall
trend test on the rounds' mean scores (p < TREND_P, tau > 0) whose last quarter of rounds is above the
floor's typical score (the mean control score). `N` is a number of rounds (`--soak 20`) or a duration
(`--soak 90s`, `--soak 10m`, `--soak 1h`: rounds until the time is up, at least one).
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pdctl.errors import UserError
from pdctl.parity.calibration import Calibration
from pdctl.parity.compare import Comparison
from pdctl.parity.divergence import summarize
from pdctl.parity.floor import Floor, explain

TREND_P = 0.001
_UNITS = {"": None, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_soak(text: str | None) -> tuple[int | None, float | None]:
    """`--soak` value -> (rounds, seconds); UserError (exit 2) on anything else."""
    if text is None:
        return None, None
    match = re.fullmatch(r"\s*(\d+)\s*([smh]?)\s*", str(text))
    if not match or int(match.group(1)) < 1:
        raise UserError(f"--soak {text!r}: expected a number of rounds (e.g. 20) or a duration (90s, 10m, 1h)")
    value, unit = int(match.group(1)), _UNITS[match.group(2)]
    return (value, None) if unit is None else (None, value * unit)


def mann_kendall(values: list[float]) -> tuple[float, float]:
    """(Kendall's tau of VALUES against their order, one-sided p-value of an increasing trend)."""
    n = len(values)
    if n < 3:
        return 0.0, 1.0
    s = sum((values[j] > values[i]) - (values[j] < values[i]) for i in range(n) for j in range(i + 1, n))
    pairs = n * (n - 1) / 2
    var = n * (n - 1) * (2 * n + 5) / 18
    z = (s - 1) / math.sqrt(var) if s > 0 else ((s + 1) / math.sqrt(var) if s < 0 else 0.0)
    return s / pairs, 0.5 * math.erfc(z / math.sqrt(2))


@dataclass
class SoakRound:
    """One round: the requests served before it, its comparisons and their summary."""

    index: int
    served_before: int
    comparisons: list[Comparison] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def mean(self) -> float:
        return sum(c.score for c in self.comparisons) / len(self.comparisons) if self.comparisons else 0.0

    @property
    def worst(self) -> float:
        return max((c.score for c in self.comparisons), default=0.0)

    @property
    def unexplained(self) -> int:
        return sum(1 for c in self.comparisons if not c.passed and c.explained_by is None and not c.uncalibrated)

    @property
    def uncalibrated(self) -> int:
        return sum(1 for c in self.comparisons if c.uncalibrated)

    def document(self) -> dict[str, Any]:
        summary = summarize(p for c in self.comparisons for p in c.positions)
        return {"round": self.index, "served_before": self.served_before, "compared": len(self.comparisons),
                "passed": sum(c.passed for c in self.comparisons), "unexplained": self.unexplained,
                "uncalibrated": self.uncalibrated,
                "mean_score": self.mean, "worst_score": self.worst, "flips": summary.flips,
                "flip_rate": round(summary.flip_rate, 6), "seconds": round(self.seconds, 2)}


@dataclass
class SoakResult:
    """Every round, the floor they were judged against, the trend and the verdict."""

    rounds: list[SoakRound]
    floor: Floor | None

    @property
    def trend(self) -> tuple[float, float]:
        return mann_kendall([r.mean for r in self.rounds])

    @property
    def typical_floor(self) -> float | None:
        measured = self.floor.measured if self.floor is not None else []
        return sum(c.score for c in measured) / len(measured) if measured else None

    @property
    def drifting(self) -> bool:
        tau, p = self.trend
        if tau <= 0 or p >= TREND_P:
            return False
        late = self.rounds[-max(1, len(self.rounds) // 4):]
        typical = self.typical_floor or 0.0
        return sum(r.mean for r in late) / len(late) > typical

    @property
    def first_bad_round(self) -> int | None:
        return next((r.index for r in self.rounds if r.unexplained), None)

    @property
    def ok(self) -> bool:
        return self.first_bad_round is None and not self.drifting and not any(r.uncalibrated for r in self.rounds)

    @property
    def verdict(self) -> str:
        """FAILED (a round beyond the floor, or drift), NOT CALIBRATED (beyond a floor that lacks a control), OK."""
        if self.first_bad_round is not None or self.drifting:
            return "FAILED"
        return "NOT CALIBRATED" if any(r.uncalibrated for r in self.rounds) else "OK"

    def reason(self) -> str:
        if self.first_bad_round is not None:
            bad = next(r for r in self.rounds if r.index == self.first_bad_round)
            return (f"round {bad.index} (after {bad.served_before} requests) has {bad.unexplained} comparison(s) "
                    "beyond the floor")
        if self.drifting:
            tau, p = self.trend
            return f"divergence grows with served requests (Mann-Kendall tau {tau:.2f}, p {p:.2g})"
        return ""

    def document(self) -> dict[str, Any]:
        tau, p = self.trend
        return {"ok": self.ok, "verdict": self.verdict, "rounds": [r.document() for r in self.rounds],
                "reason": self.reason() or None,
                "first_bad_round": self.first_bad_round, "trend": {"tau": tau, "p": p, "threshold_p": TREND_P},
                "drifting": self.drifting, "typical_floor": self.typical_floor,
                "threshold": self.floor.threshold if self.floor is not None else None}


def run_soak(send_round: Callable[[int], list[Comparison]], floor: Floor | None, *, rounds: int | None,
             seconds: float | None, calibration: Calibration | None = None) -> SoakResult:
    """ROUNDS rounds (or rounds for SECONDS, at least one) of SEND_ROUND(index) — the concurrent procedure on
    the candidate, flushing before the first round only — judged against FLOOR."""
    result = SoakResult([], floor)
    deadline = time.monotonic() + seconds if seconds else None
    served = 0
    index = 0
    while True:
        index += 1
        started = time.monotonic()
        comps = send_round(index)
        explain(comps, floor, mode="concurrent")
        if calibration is not None and floor is not None:
            calibration.judge(comps)
        result.rounds.append(SoakRound(index, served, comps, time.monotonic() - started))
        served += len(comps) + sum(c.resyncs for c in comps)
        if rounds is not None and index >= rounds:
            break
        if deadline is not None and time.monotonic() >= deadline:
            break
    return result
