"""Per-mode results, the control noise floor, the verdict and the --json document.

The verdict follows issue 7: a cold failure always fails the run (both caches were empty, one request at a
time: nothing but the deployment can explain a difference). A warm or concurrent failure fails the run only
when it is not explained — neither by `prefill_differs` (the prompt's logits differed before any KV
transfer: batching or prefix reuse in prefill) nor by the control noise floor (the reference differs from
itself as much under the same conditions: colocated servers are not bit-stable under batching either).

`prefill_differs` explains a failure only when a cold comparison of the same prompt PASSED in the same run
(issue 12): that pass is what shows the deployment's prefill computes this prompt right, so that a later
difference in its logits comes from batching or prefix reuse. Without it (`--warm` alone, or cold failed) a
prefill running wrong weights would "explain" its own failures; such a failure stays unexplained and says so.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from pdctl.parity.compare import Comparison


def _finite(value: float | None) -> float | None:
    """JSON has no Infinity: a delta that could not be measured (missing logprob) is written as null."""
    if value is None or not math.isfinite(value):
        return None
    return float(value)


@dataclass
class ModeResult:
    """All comparisons of one mode, and the reference-vs-itself comparisons run under the same conditions."""

    name: str
    comparisons: list[Comparison] = field(default_factory=list)
    control: list[Comparison] | None = None  # None = control not run for this mode

    @property
    def control_floor(self) -> float | None:
        """The largest |Δ logprob| the reference showed against itself (None without a control)."""
        if self.control is None:
            return None
        # an errored or unmeasurable control send says nothing about noise: it must not lift the floor to inf
        return max((c.max_abs_delta for c in self.control if math.isfinite(c.max_abs_delta)), default=0.0)

    @property
    def control_failed(self) -> bool:
        return bool(self.control) and any(not c.passed for c in self.control)

    @property
    def control_token_mismatch(self) -> bool:
        return bool(self.control) and any(not c.tokens_match for c in self.control)

    def explain(self, vouched: Collection[int] = ()) -> None:
        """Mark each failure of a warm/concurrent mode with what explains it (if anything does).

        VOUCHED: indexes of the prompts whose cold comparison passed in this run; only those may be
        explained by `prefill_differs`.
        """
        for comp in self.comparisons:
            comp.explained_by = None
            comp.unexplained_because = None
            if comp.passed or self.name == "cold":
                continue
            if comp.expect_cached and comp.cached_tokens <= 0:
                comp.unexplained_because = "no prefix reuse where a cached prefix was expected"
                continue  # a missing prefix reuse is the deployment's, whatever the logits say
            if comp.prefill_differs and comp.prompt in vouched:
                comp.explained_by = "prefill_differs"
            elif (
                self.control_failed
                and self.control_floor is not None
                and comp.max_abs_delta <= self.control_floor + 1e-9
                and (comp.tokens_match or self.control_token_mismatch)
            ):
                comp.explained_by = "control"
            elif comp.prefill_differs:
                comp.unexplained_because = (
                    "prefill logits differ, but no cold comparison of this prompt passed in this run to vouch "
                    "for the deployment's prefill (run --cold with --warm/--concurrent)"
                )
            else:
                comp.unexplained_because = "beyond the control noise floor with prefill logits in agreement"

    @property
    def failures(self) -> list[Comparison]:
        return [c for c in self.comparisons if not c.passed]

    @property
    def unexplained(self) -> list[Comparison]:
        return [c for c in self.failures if c.explained_by is None]

    @property
    def ok(self) -> bool:
        return not self.unexplained

    def document(self) -> dict[str, Any]:
        """This mode's part of the --json document (CLI.md: compared, passed, failures)."""
        doc: dict[str, Any] = {
            "compared": len(self.comparisons),
            "passed": sum(c.passed for c in self.comparisons),
            "failures": [_clean(c.failure_doc()) for c in self.failures],
            "ok": self.ok,
            "unexplained": len(self.unexplained),
            "max_abs_delta": _finite(max((c.max_abs_delta for c in self.comparisons), default=0.0)),
            "cached_tokens": [c.cached_tokens for c in self.comparisons],
        }
        if self.control is not None:
            doc["control"] = {
                "compared": len(self.control),
                "passed": sum(c.passed for c in self.control),
                "floor": _finite(self.control_floor),
                "failures": [_clean(c.failure_doc()) for c in self.control if not c.passed],
            }
        return doc


def _clean(doc: dict[str, Any]) -> dict[str, Any]:
    doc["max_abs_delta"] = _finite(doc["max_abs_delta"])
    doc["prefill_max_abs_delta"] = _finite(doc.get("prefill_max_abs_delta"))
    doc["deltas"] = [_finite(d) for d in doc.get("deltas", [])]
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
    candidate_lock: dict[str, Any] | None = None  # the candidate run's lock.json (pdctl.runs.lock), if launched

    @property
    def ok(self) -> bool:
        return all(mode.ok for mode in self.modes.values())

    def document(self) -> dict[str, Any]:
        """The --json document (keys from CLI.md, plus the endpoints, the suite and what it was built from)."""
        return {
            "ok": self.ok,
            "modes": {name: mode.document() for name, mode in self.modes.items()},
            "tolerance": self.tolerance,
            "max_new_tokens": self.max_new_tokens,
            "candidate": self.candidate,
            "candidate_workers": self.candidate_workers,
            "candidate_lock": self.candidate_lock,
            "reference": self.reference,
            "prompts": self.suite,
            "suite_facts": self.facts,
        }
