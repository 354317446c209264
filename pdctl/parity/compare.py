"""One comparison: a server's answer to a prompt, scored on the reference's answer to the same prompt.

Two readings of the same numbers:
- the kit's check (SGLang's `PDLogprobParityMixin`): identical greedy tokens and |Δ logprob| within a
  tolerance at every generated position — `passed`. A comparison that passes it never fails a run;
- the divergence (pdctl.parity.divergence) at every position, teacher-forced (pdctl.parity.teacher), and
  `score`: the mean over its positions of the top-k KL, each position capped at KL_CAP nats. A comparison
  beyond the tolerance is judged by its score against the noise floor (pdctl.parity.floor).

Attribution: `prefill_differs` says whether the prompt's own logprobs (`input_token_logprobs`, computed by
prefill before any KV moves) already differed beyond the tolerance.

`hard_failure`: what no floor can explain — the request errored, the server generated fewer tokens than
asked, or (warm) no prefix was reused where one should have been.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from pdctl.parity.divergence import PositionStat, position_stat
from pdctl.parity.teacher import Forced, RefSequence

KL_CAP = 4.0  # nats: one position (a wild one, or one not measured) weighs at most this much in a score


@dataclass
class Comparison:
    """The outcome of comparing one answer to the reference's answer for the same prompt."""

    prompt: int  # index of the prompt in the suite
    prompt_name: str
    prompt_tokens: int
    label: str  # which send: "cold", "warm", "warm:prefix", "concurrent#2", "control:tp2 cold", "soak#3", ...
    tokens_match: bool
    first_mismatch: int | None  # first position whose token differs or whose |Δ| exceeds the tolerance
    first_token_mismatch: int | None
    max_abs_delta: float
    deltas: list[float] = field(default_factory=list)  # |Δ logprob| per generated position (teacher-forced)
    prefill_differs: bool = False
    prefill_max_abs_delta: float | None = None
    cached_tokens: int = 0
    expect_cached: bool = False
    passed: bool = True  # the kit's check
    reason: str = ""
    explained_by: str | None = None  # "floor" | "prefill_differs" for failures that are not the deployment's
    unexplained_because: str | None = None  # why a failure is not explained (set by ModeResult.explain)
    uncalibrated: bool = False  # a failure the floor may lack a control to explain (pdctl.parity.calibration)
    score: float = 0.0  # mean capped top-k KL over the positions (nats)
    flips: int = 0
    resyncs: int = 0
    hard_failure: bool = False
    positions: list[PositionStat] = field(default_factory=list)

    def failure_doc(self) -> dict[str, Any]:
        """The failure entry of the --json document (CLI.md keys first, then the extras)."""
        doc = asdict(self)
        doc.pop("positions")
        doc["kl"] = [p.kl for p in self.positions]
        ordered = {k: doc.pop(k) for k in ("prompt", "prompt_tokens", "first_mismatch", "max_abs_delta",
                                            "prefill_differs", "cached_tokens")}
        ordered.update(doc)
        return ordered


def _logprob_items(meta: dict[str, Any], key: str) -> list[tuple[float | None, int | None]]:
    """(logprob, token id) pairs of META[KEY]; SGLang items are [logprob, token_id, text|null]."""
    items = meta.get(key) or []
    pairs: list[tuple[float | None, int | None]] = []
    for item in items:
        if isinstance(item, (list, tuple)) and item:
            lp = item[0]
            tok = item[1] if len(item) > 1 else None
        else:
            lp, tok = item, None
        lp_f = float(lp) if isinstance(lp, (int, float)) and not isinstance(lp, bool) else None
        if lp_f is not None and not math.isfinite(lp_f):
            lp_f = None
        pairs.append((lp_f, tok if isinstance(tok, int) else None))
    return pairs


def prefill_delta(candidate: dict[str, Any], reference: dict[str, Any]) -> float | None:
    """Max |Δ| between the prompts' input_token_logprobs, or None when there is nothing to compare.

    The candidate may return only a tail of them (a warm request whose prefix was served from cache): align
    the two lists at their ends, which are the same prompt positions.
    """
    cand = _logprob_items(candidate, "input_token_logprobs")
    ref = _logprob_items(reference, "input_token_logprobs")
    n = min(len(cand), len(ref))
    if n == 0:
        return None
    worst: float | None = None
    for (c_lp, c_tok), (r_lp, r_tok) in zip(cand[len(cand) - n:], ref[len(ref) - n:]):
        if c_tok is not None and r_tok is not None and c_tok != r_tok:
            return math.inf  # not even the same prompt tokens
        if c_lp is None or r_lp is None:
            continue
        d = abs(c_lp - r_lp)
        worst = d if worst is None else max(worst, d)
    return worst


def score_of(positions: list[PositionStat]) -> float:
    """A comparison's score: the mean of min(KL, KL_CAP) over its positions (unmeasured = KL_CAP)."""
    if not positions:
        return 0.0
    return sum(min(p.kl, KL_CAP) for p in positions) / len(positions)


def decided_beyond(threshold: float | None, ref_seq: RefSequence, prompt_len: int):
    """The early stop of teacher forcing: True once the positions scored so far alone give a score above
    THRESHOLD (None: never — no floor, or a control being measured)."""
    if threshold is None:
        return None
    n = max(1, len(ref_seq.tokens))

    def decided(scored: list[Any]) -> bool:
        total = sum(min(position_stat(i, prompt_len, ref_seq.tokens[i], ref_seq.logprobs[i], ref_seq.tops[i], s).kl,
                        KL_CAP) for i, s in enumerate(scored))
        return total / n > threshold
    return decided


def compare(
    forced: Forced,
    reference: dict[str, Any],
    ref_seq: RefSequence,
    *,
    prompt: int,
    prompt_name: str,
    label: str,
    tolerance: float,
    max_new_tokens: int,
    expect_cached: bool = False,
) -> Comparison:
    """Judge FORCED (an answer scored on the reference's sequence) the kit's way, with its divergence."""
    prompt_tokens = int(reference.get("prompt_tokens") or 0) or ref_seq.prompt_len
    meta = forced.meta or {}
    positions = [
        position_stat(i, prompt_tokens, ref_seq.tokens[i], ref_seq.logprobs[i], ref_seq.tops[i], s)
        for i, s in enumerate(forced.scored)
    ]
    deltas = [p.delta for p in positions]
    flips = [p.index for p in positions if p.flip]
    first_token_mismatch = flips[0] if flips else None
    over = [p.index for p in positions if p.flip or p.delta > tolerance]
    first_mismatch = over[0] if over else None
    max_delta = max(deltas, default=0.0) if forced.meta is not None else math.inf

    p_delta = prefill_delta(meta, reference) if forced.meta is not None else None
    if p_delta is None and positions and forced.meta is not None:
        # No measurable prompt logprobs (a warm resend whose prompt came from cache): the first generated
        # token stands in for them — prefill computes it and sends it along with the KV.
        p_delta = deltas[0] if not positions[0].flip else math.inf
    reasons: list[str] = []
    hard: list[str] = []
    if forced.error is not None:
        hard.append(f"request failed: {forced.error}")
    if len(ref_seq.tokens) != max_new_tokens:
        hard.append(f"reference generated {len(ref_seq.tokens)} tokens, expected {max_new_tokens}")
    if forced.short:
        hard.append(f"generated fewer tokens than the reference's {len(ref_seq.tokens)}")
    if expect_cached and forced.meta is not None and int(meta.get("cached_tokens") or 0) <= 0:
        hard.append("no prefix reuse (cached_tokens = 0) where a cached prefix was expected")
    if first_token_mismatch is not None:
        reasons.append(f"token ids differ at {len(flips)} position(s) from {first_token_mismatch}")
    if max_delta > tolerance:
        reasons.append(f"|Δ logprob| {max_delta:.4g} > {tolerance:g}")
    if forced.capped:
        reasons.append(f"could not follow the reference's text after {forced.resyncs} resends (rest not measured)")
    if forced.decided:
        reasons.append(f"beyond the floor after {forced.resyncs} resends (rest not measured)")
    return Comparison(
        prompt=prompt,
        prompt_name=prompt_name,
        prompt_tokens=prompt_tokens,
        label=label,
        tokens_match=first_token_mismatch is None,
        first_mismatch=first_mismatch if forced.meta is not None else 0,
        first_token_mismatch=first_token_mismatch if forced.meta is not None else 0,
        max_abs_delta=max_delta,
        deltas=deltas,
        prefill_differs=p_delta is not None and p_delta > tolerance,
        prefill_max_abs_delta=p_delta,
        cached_tokens=int(meta.get("cached_tokens") or 0),
        expect_cached=expect_cached,
        passed=not (hard or reasons),
        reason="; ".join(hard + reasons),
        score=score_of(positions) if forced.meta is not None else KL_CAP,
        flips=len(flips),
        resyncs=forced.resyncs,
        hard_failure=bool(hard),
        positions=positions,
    )
