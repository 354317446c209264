"""NOT CALIBRATED: a floor that lacks a control the comparison needs judges nothing it could have explained.

Why (issue 35): the floor is what correct servers differ by under the candidate's conditions; when the
candidate's attention-TP split differs from the reference's, only a TP control puts TP rounding in it
(pdctl.parity.controls). Without one — the splits unknown, or a needed control not given, disabled or failed
to start — the floor is the reference against itself (0 cold on a deterministic server), and a clean
deployment's TP rounding would read as corruption: a false alarm that teaches users to ignore parity. So a
failure such a floor does not explain is *not calibrated* (verdict NOT CALIBRATED, its own exit code), unless it
is gross — something no TP rounding produces, calibrated or not — which still fails:

- **early flips**: the greedy token differs at EARLY_FLIPS or more of the first EARLY_POSITIONS generated
  positions (teacher-forced: each from the reference's own context). Rounding flips only near-ties, a few
  percent of positions (4.1% for a TP2 control under gpu-like numerics, docs/parity.md), not the start of an
  answer nearly position after position;
- **divergence far above any TP floor measured for that numerics**: a score above GROSS_FACTOR x the largest
  floor a TP control has shown under the numerics both sides report (MEASURED_TP_FLOOR). Numerics pdctl has
  not measured (SGLang on GPUs: /server_info does not say) have no such bound, and only early flips fail there.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pdctl.parity.compare import Comparison

# The largest TP-control floor level (mean capped top-k KL, nats) pdctl has measured per numerics of the
# reference engine (docs/parity.md, "False alarms and detection" and "A real report"): gpu-like, `make demo`'s
# cold floor 0.02554 (TP2 control, 10 prompts up to 4063 tokens; clean candidates scored at most 1.42x their
# floor over 16 runs, corrupted ones at least 51.5x); exact: 0 (a TP2 control equals TP1 to float32 rounding,
# within the kit's tolerance: tests/parity/test_parity_e2e.py).
MEASURED_TP_FLOOR = {"gpu-like": 0.0256, "exact": 0.0}
GROSS_FACTOR = 10.0  # 7x above the largest clean score seen (1.42 x 0.0256), 5x under the smallest corrupted one
EARLY_POSITIONS = 5
EARLY_FLIPS = 4


@dataclass(frozen=True)
class Calibration:
    """Whether the floor has every control the comparison needs; if not, why, what would calibrate it, and the
    score above which a failure is gross anyway (None: the numerics have no measured bound)."""

    calibrated: bool
    why: str = ""
    calibrate_with: str = ""
    numerics: str | None = None

    @property
    def gross_score(self) -> float | None:
        floor = MEASURED_TP_FLOOR.get(self.numerics or "")
        return None if floor is None else GROSS_FACTOR * floor

    def gross(self, comp: Comparison) -> str | None:
        """Why COMP is a failure no TP rounding produces (None when rounding could have caused it)."""
        early = [p for p in comp.positions[:EARLY_POSITIONS] if p.flip]
        if len(comp.positions) >= EARLY_POSITIONS and len(early) >= EARLY_FLIPS:
            return (f"tokens flip at {len(early)} of the first {EARLY_POSITIONS} positions (TP rounding flips "
                    "only near-ties)")
        bound = self.gross_score
        if bound is None or not comp.score > bound:
            return None
        if bound == 0:
            return (f"divergence {comp.score:.3g} beyond the tolerance under {self.numerics} numerics, where a TP "
                    "control stays within it (measured)")
        return (f"divergence {comp.score:.3g} > {GROSS_FACTOR:g} x the largest TP floor measured under "
                f"{self.numerics} numerics ({MEASURED_TP_FLOOR[self.numerics or '']:.3g})")

    def judge(self, comparisons: Iterable[Comparison]) -> None:
        """After the floor's explanation: a failure it leaves unexplained is not calibrated unless gross (or a
        hard failure, which no noise explains)."""
        if self.calibrated:
            return
        for comp in comparisons:
            if comp.passed or comp.explained_by is not None or comp.hard_failure:
                continue
            gross = self.gross(comp)
            if gross is not None:
                comp.unexplained_because = f"gross: {gross}"
            else:
                comp.uncalibrated = True
                comp.unexplained_because = f"not calibrated: {self.why}"

    def document(self) -> dict[str, Any]:
        return {"calibrated": self.calibrated, "why": self.why or None, "calibrate_with": self.calibrate_with or None,
                "numerics": self.numerics, "gross_score": self.gross_score,
                "early_flips": f"{EARLY_FLIPS} of the first {EARLY_POSITIONS} positions"}


def gross_numerics(candidate: str | None, reference: str | None) -> str | None:
    """The numerics whose measured TP floor bounds rounding here: both sides' when they agree; the larger
    bound when both are measured numerics (the safer side: fewer gross calls); None when either is unknown."""
    if candidate is None or reference is None:
        return None
    if candidate == reference:
        return candidate
    known = [n for n in (candidate, reference) if n in MEASURED_TP_FLOOR]
    if len(known) < 2:
        return None
    return max(known, key=lambda n: MEASURED_TP_FLOOR[n])
