"""Optimistic admission and retraction, SGLang's way: how much of max_new_tokens admission reserves, and which
running request gives its pages back when decode runs out of KV pages.

Why not reserve every request's max_new_tokens: most requests stop early, so SGLang admits against a
`new_token_ratio` of the remaining output tokens (0.7 at first, decaying to 0.7 * 0.14 over 600 decode steps,
reset when the server idles). When running requests outgrow that estimate, the decode step would not find
its pages: SGLang then retracts requests — frees their pages and re-queues them — instead of failing them,
and raises the ratio so admission gets more careful. The retracted request is resumed later by recomputing
its KV (prompt plus the tokens generated so far) and continues decoding where it stopped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pdctl.reference.request import GenRequest

INIT_NEW_TOKEN_RATIO = 0.7  # SGLANG_INIT_NEW_TOKEN_RATIO
MIN_NEW_TOKEN_RATIO_FACTOR = 0.14  # SGLANG_MIN_NEW_TOKEN_RATIO_FACTOR
NEW_TOKEN_RATIO_DECAY_STEPS = 600  # SGLANG_NEW_TOKEN_RATIO_DECAY_STEPS
RETRACT_DECODE_STEPS = 20  # SGLANG_RETRACT_DECODE_STEPS
LAST_REQUEST_OOM = (
    "KV cache out of memory: Out of memory even after retracting all other requests in the decode batch. "
    "Aborting the last request (raise --max-total-tokens)."
)


@dataclass
class NewTokenRatio:
    """SGLang's NewTokenRatioTracker: the share of remaining max_new_tokens admission reserves."""

    init: float
    min: float
    decay: float
    current: float

    @classmethod
    def from_conservativeness(cls, conservativeness: float = 1.0) -> NewTokenRatio:
        """--schedule-conservativeness scales the initial ratio (capped at 1)."""
        init = min(INIT_NEW_TOKEN_RATIO * conservativeness, 1.0)
        low = min(init * MIN_NEW_TOKEN_RATIO_FACTOR, 1.0)
        return cls(init=init, min=low, decay=(init - low) / NEW_TOKEN_RATIO_DECAY_STEPS, current=init)

    def decay_step(self) -> None:
        """One decode step passed without trouble: admission may get bolder."""
        self.current = max(self.current - self.decay, self.min)

    def reset(self) -> None:
        """The server is idle: start over from the initial ratio."""
        self.current = self.init

    def after_retract(self, kept: Sequence[GenRequest]) -> None:
        """A retraction happened: the ratio becomes what the requests still running have really used."""
        decoded = sum(len(r.output_ids) for r in kept)
        budget = sum(r.sampling.max_new_tokens for r in kept)
        self.current = min(1.0, (decoded + RETRACT_DECODE_STEPS * len(kept)) / (budget + 1))


def retraction_victim(running: Sequence[GenRequest]) -> GenRequest:
    """The running request to retract first: fewest output tokens, then the longest prompt (SGLang's order)."""
    return min(running, key=lambda r: (len(r.output_ids), -r.prompt_len))
