"""The noise floor: how much two correct servers differ on this suite, and the verdict measured against it.

Why: under real GPU numerics a PD deployment never matches a reference bit for bit — batch composition,
chunking, prefix reuse and the TP split change the rounding — and a fixed |Δ| tolerance can only be
"nothing changed at all" (false alarms) or "anything goes" (missed corruption). So before judging, parity
measures correct servers under the same conditions as the candidate (pdctl.parity.runner):

- the reference against itself: re-sent cold, warm (prefix reuse), concurrent (other batch compositions);
- when the candidate's attention-TP split differs from the reference's, a **TP control**: a correct server
  at the candidate's TP (SGLang's parity kits compare PD with a colocated server of the prefill's TP for the
  same reason: "changing TP can change the first sampled token"), sent the same requests in the same mode.

Every control comparison is scored exactly like the candidate's (teacher-forced, the mean of the capped
top-k KL over its positions). The floor of a mode is the worst control score (`level`); a candidate
comparison beyond the kit's tolerance is explained by the floor when its score is at most `factor` x level
(`threshold`), else it fails. The margin is threshold / the candidate's worst score: > 1 passes.

Why this is sound: (1) the statistic uses every position of every comparison, so a corruption that moves
distributions everywhere after the damage is not hidden behind one noisy position, and a near-tie that
rounding tips (one flip) weighs at most KL_CAP / positions; (2) the controls are correct servers sent the
same prompts in the same mode, so prompts that are sensitive to rounding are sensitive in the floor too;
(3) a control request that failed says nothing about noise and never lifts the floor, and a failure no
noise can cause (an error, a short answer, no prefix reuse) is never explained; (4) with exact numerics
the floor is 0 and the rule reduces to the kit's (any difference beyond the tolerance fails).
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pdctl.parity.compare import Comparison
from pdctl.parity.divergence import summarize

DEFAULT_FACTOR = 4.0
STATISTIC = ("score = mean over a comparison's generated positions of the top-k KL(reference || server), "
             "each position capped at 4 nats; teacher-forced on the reference's tokens")


@dataclass
class Floor:
    """The control comparisons of one mode and the threshold they set."""

    controls: list[str]  # what was measured: "reference (itself)", "tp2 control http://..."
    comparisons: list[Comparison] = field(default_factory=list)
    factor: float = DEFAULT_FACTOR

    @property
    def measured(self) -> list[Comparison]:
        """Control comparisons that say something about noise (not errored, not short)."""
        return [c for c in self.comparisons if not c.hard_failure]

    @property
    def level(self) -> float:
        return max((c.score for c in self.measured), default=0.0)

    @property
    def threshold(self) -> float:
        return self.factor * self.level

    @property
    def max_abs_delta(self) -> float:
        return max((c.max_abs_delta for c in self.measured if math.isfinite(c.max_abs_delta)), default=0.0)

    def document(self) -> dict[str, Any]:
        return {
            "controls": self.controls, "compared": len(self.comparisons),
            "passed": sum(c.passed for c in self.comparisons), "errored": len(self.comparisons) - len(self.measured),
            "level": self.level, "factor": self.factor, "threshold": self.threshold,
            "max_abs_delta": self.max_abs_delta,
            "summary": summarize(p for c in self.measured for p in c.positions).document(),
        }


def explain(comparisons: list[Comparison], floor: Floor | None, *, mode: str, vouched: Collection[int] = ()) -> None:
    """Mark each failure (of the kit's check) with what explains it, or why nothing does.

    With a FLOOR: a hard failure is never explained; anything else is explained by the floor when its score
    is within the threshold. Without one (--no-control): cold failures are never explained, and a warm or
    concurrent failure is explained by `prefill_differs` only for a prompt whose cold comparison passed in
    this run (VOUCHED): that pass shows the deployment's prefill computes the prompt right.
    """
    if floor is not None:
        _prefill_against_floor(comparisons, floor)
    for comp in comparisons:
        comp.explained_by = None
        comp.unexplained_because = None
        if comp.passed:
            continue
        if comp.hard_failure:
            comp.unexplained_because = "no noise explains it: " + comp.reason.split("; ")[0]
            continue
        if floor is not None:
            if comp.score <= floor.threshold + 1e-12:
                comp.explained_by = "floor"
            else:
                comp.unexplained_because = (
                    f"divergence {comp.score:.3g} > {floor.factor:g} x the floor {floor.level:.3g} "
                    f"(threshold {floor.threshold:.3g})")
            continue
        if mode == "cold":
            comp.unexplained_because = "a cold difference and no floor was measured (--no-control)"
        elif comp.prefill_differs and comp.prompt in vouched:
            comp.explained_by = "prefill_differs"
        elif comp.prefill_differs:
            comp.unexplained_because = (
                "prefill logits differ, but no cold comparison of this prompt passed in this run to vouch "
                "for the deployment's prefill (run --cold with --warm/--concurrent)")
        else:
            comp.unexplained_because = "beyond the tolerance, and no floor was measured (--no-control)"


def _prefill_against_floor(comparisons: list[Comparison], floor: Floor) -> None:
    """`prefill_differs` (attribution only when there is a floor): beyond the tolerance AND beyond FACTOR x what
    the controls' prompt logprobs differ by for the same prompt — under another TP split the prefill's logits
    differ from the reference's by rounding alone, which says nothing about the deployment."""
    noise: dict[int, float] = {}
    for c in floor.measured:
        if c.prefill_max_abs_delta is not None and math.isfinite(c.prefill_max_abs_delta):
            noise[c.prompt] = max(noise.get(c.prompt, 0.0), c.prefill_max_abs_delta)
    for comp in comparisons:
        if comp.prefill_differs and comp.prefill_max_abs_delta is not None:
            comp.prefill_differs = comp.prefill_max_abs_delta > floor.factor * noise.get(comp.prompt, 0.0)


def verdict_numbers(comparisons: list[Comparison], floor: Floor | None) -> dict[str, Any]:
    """The mode's statistic against its floor: worst score, ratio to the floor, margin to the threshold."""
    judged = [c for c in comparisons if not c.hard_failure]
    worst = max((c.score for c in judged), default=0.0)
    beyond = [c for c in judged if not c.passed]
    doc: dict[str, Any] = {"worst": worst, "summary": summarize(p for c in judged for p in c.positions).document()}
    if floor is None:
        return doc | {"ratio": None, "margin": None}
    level = floor.level
    doc["ratio"] = (worst / level) if level > 0 else (0.0 if worst == 0 else None)
    worst_beyond = max((c.score for c in beyond), default=None)
    if worst_beyond is None:
        doc["margin"] = None  # every comparison within the tolerance: nothing for the floor to explain
    elif worst_beyond == 0:
        doc["margin"] = None
    else:
        doc["margin"] = floor.threshold / worst_beyond
    return doc
