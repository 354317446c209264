"""One comparison: a candidate's answer to a prompt against the reference's answer to the same prompt.

What is compared is what SGLang's parity kit requires — identical greedy token ids and |Δ logprob| within a
tolerance at every generated position — plus the attribution users need when it fails: whether the prompt's
own logprobs (`input_token_logprobs`, computed by prefill before any KV moves) already differ. A difference
that is there before the transfer cannot have been caused by the transfer.

Deltas are taken up to and including the first position where the token ids differ: past it the two
sequences continue from different contexts and their logprobs no longer measure the same thing.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class Comparison:
    """The outcome of comparing one candidate answer to one reference answer."""

    prompt: int  # index of the prompt in the suite
    prompt_name: str
    prompt_tokens: int
    label: str  # which send: "cold", "warm", "warm:prefix", "concurrent#2", ...
    tokens_match: bool
    first_mismatch: int | None  # first position whose token differs or whose |Δ| exceeds the tolerance
    first_token_mismatch: int | None
    max_abs_delta: float
    deltas: list[float] = field(default_factory=list)  # |Δ logprob| per generated position
    prefill_differs: bool = False
    prefill_max_abs_delta: float | None = None
    cached_tokens: int = 0
    expect_cached: bool = False
    passed: bool = True
    reason: str = ""
    explained_by: str | None = None  # "prefill_differs" | "control" for failures that are not the transfer's
    unexplained_because: str | None = None  # why a failure is not explained (set by ModeResult.explain)

    def failure_doc(self) -> dict[str, Any]:
        """The failure entry of the --json document (CLI.md keys first, then the extras)."""
        doc = asdict(self)
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


def compare(
    candidate: dict[str, Any],
    reference: dict[str, Any],
    *,
    prompt: int,
    prompt_name: str,
    label: str,
    tolerance: float,
    max_new_tokens: int,
    expect_cached: bool = False,
) -> Comparison:
    """Compare two /generate meta_infos for the same prompt the way the kit does, plus attribution."""
    cand = _logprob_items(candidate, "output_token_logprobs")
    ref = _logprob_items(reference, "output_token_logprobs")
    prompt_tokens = int(reference.get("prompt_tokens") or candidate.get("prompt_tokens") or 0)
    cached = int(candidate.get("cached_tokens") or 0)

    first_token_mismatch: int | None = None
    first_mismatch: int | None = None
    deltas: list[float] = []
    for pos in range(max(len(cand), len(ref))):
        if pos >= len(cand) or pos >= len(ref):
            first_token_mismatch = pos if first_token_mismatch is None else first_token_mismatch
            first_mismatch = pos if first_mismatch is None else first_mismatch
            break
        (c_lp, c_tok), (r_lp, r_tok) = cand[pos], ref[pos]
        delta = abs(c_lp - r_lp) if c_lp is not None and r_lp is not None else math.inf
        deltas.append(delta)
        if (delta > tolerance or c_tok != r_tok) and first_mismatch is None:
            first_mismatch = pos
        if c_tok != r_tok:
            first_token_mismatch = pos
            break
    max_delta = max(deltas) if deltas else (math.inf if cand != ref else 0.0)

    p_delta = prefill_delta(candidate, reference)
    if p_delta is None and deltas:
        # No measurable prompt logprobs (a warm resend whose prompt came from cache): the first generated
        # token stands in for them — prefill computes it and sends it along with the KV.
        p_delta = deltas[0] if first_token_mismatch != 0 else math.inf
    reasons: list[str] = []
    if len(ref) != max_new_tokens:
        reasons.append(f"reference generated {len(ref)} tokens, expected {max_new_tokens}")
    if first_token_mismatch is not None:
        reasons.append(f"token ids differ from position {first_token_mismatch}")
    if max_delta > tolerance:
        reasons.append(f"|Δ logprob| {max_delta:.4g} > {tolerance:g}")
    if expect_cached and cached <= 0:
        reasons.append("no prefix reuse (cached_tokens = 0) where a cached prefix was expected")
    return Comparison(
        prompt=prompt,
        prompt_name=prompt_name,
        prompt_tokens=prompt_tokens,
        label=label,
        tokens_match=first_token_mismatch is None,
        first_mismatch=first_mismatch,
        first_token_mismatch=first_token_mismatch,
        max_abs_delta=max_delta,
        deltas=deltas,
        prefill_differs=p_delta is not None and p_delta > tolerance,
        prefill_max_abs_delta=p_delta,
        cached_tokens=cached,
        expect_cached=expect_cached,
        passed=not reasons,
        reason="; ".join(reasons),
    )
