"""Does a live rehearsal on SGLang's stack agree with check-compat? (pure logic, pdctl's interpreter)

check-compat predicts, per rule, the stage at which SGLang fails; a rehearsal moves one request through
SGLang's managers, senders and receivers and says where it really failed (or that every byte landed). They
can only be compared on the rules a rehearsal exercises: the KV transfer's own rules (handshake,
registration, head mapping, the head-slice transfer). Rules about things a rehearsal does not run — argument
parsing, model weights, placement, chunked prefill, speculative decoding — are listed as not exercised.
Agreement: check-compat passes and every byte landed, or check-compat fails and SGLang failed at the stage
the first failing rule names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.sglang.stages import ORDER

# Rules a rehearsal exercises (everything else is outside what one request through the stack can show):
REHEARSED_RULES = (
    "page-size-match",  # decode's try_ensure_parallel_info compares page sizes
    "kv-dtype-match",  # ... and KV dtype strings
    "kv-layout-pd",  # SGLang's pools refuse HND layout for PD at KV registration
    "attn-tp-ratio",  # the decode rank mapping onto prefill ranks
    "nixl-tp-over-heads",  # NIXL's prepared head-group dlists at registration
    "gqa-replication-version",  # which head a replicated decode rank receives (checked byte for byte)
    "hetero-tp-swa-layout",  # the head-slice SWA transfer's layout check
    "hetero-tp-swa-version",  # SWA state over unequal TP in older releases
    "hybrid-swa-memory-match",  # SWA state on one role only
    "state-transfer-backend",  # a release whose NIXL drops the state component (a hybrid model's mamba state)
    "mamba-hetero-tp",  # the mamba state over unequal attention TP (checked byte for byte on the decode side)
)
# Rules about SGLang's servers on CPU nodes that a rehearsal steps around by design, saying so in every report:
# SGLang's guard against NIXL unequal TP into host memory guards the servers' KV pools, which a CPU rehearsal
# of a GPU deployment's transfer path relabels (docs/sglang-stack.md: the guard bypassed); pdctl's own stack
# never meets it. A launch of real SGLang servers on CPU nodes is still refused by the rule.
BYPASSED_RULES = ("nixl-hetero-tp-host-memory",)


@dataclass(frozen=True)
class Prediction:
    """check-compat's verdict, split into what a rehearsal can confirm and what it cannot."""

    compat_ok: bool  # the whole check-compat verdict (CLI.md's `ok`)
    ok: bool  # no rehearsed rule failed: the request should transfer byte-exactly
    stage: str | None  # the earliest stage of a failed rehearsed rule
    rules: list[dict[str, Any]] = field(default_factory=list)  # failed rehearsed rules (rule, stage, message)
    not_rehearsed: list[dict[str, Any]] = field(default_factory=list)  # failed rules a rehearsal cannot check
    bypassed: list[dict[str, Any]] = field(default_factory=list)  # failed rules the rehearsal steps around

    def to_dict(self) -> dict[str, Any]:
        return {"compat_ok": self.compat_ok, "predicted_ok": self.ok, "predicted_stage": self.stage,
                "predicted_rules": self.rules, "not_rehearsed": self.not_rehearsed,
                "bypassed_rules": self.bypassed}


def predict(findings: list[Any]) -> Prediction:
    """Split check-compat's FINDINGS (pdctl.compat.findings.Finding) into a rehearsal's prediction."""
    errors = [f for f in findings if f.is_error]
    failed = [f for f in errors if f.rule not in BYPASSED_RULES]
    bypassed = [{"rule": f.rule, "stage": f.stage, "message": f.message} for f in errors if f.rule in BYPASSED_RULES]
    rehearsed = [f for f in failed if f.rule in REHEARSED_RULES]
    others = [f for f in failed if f.rule not in REHEARSED_RULES]
    stage = min((f.stage for f in rehearsed), key=ORDER.index, default=None)
    brief = [{"rule": f.rule, "stage": f.stage, "message": f.message} for f in rehearsed]
    return Prediction(not failed, not rehearsed, stage, brief,
                      [{"rule": f.rule, "stage": f.stage, "message": f.message} for f in others], bypassed)


def first_stage(*stages: str | None) -> str | None:
    """The earliest of the stages reported (None when none is)."""
    known = [s for s in stages if s]
    return min(known, key=ORDER.index) if known else None


def agrees(prediction: Prediction, verified: bool, stage: str | None) -> bool:
    """True when the rehearsal's outcome is what check-compat predicted (same stage on a failure)."""
    if prediction.ok:
        return verified
    return not verified and stage == prediction.stage
