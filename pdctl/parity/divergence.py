"""How far one answer's next-token distributions are from the reference's, position by position.

Why per position, and why more than |Δ logprob| of one token: a harmless rounding difference moves a few
logprobs a little (and, at a "sensitive" position where two tokens are nearly tied, one a lot), while a
transfer that hands decode wrong KV moves the whole distribution at nearly every position after the damage.
So every position of every comparison yields three numbers:

- `delta`: |Δ logprob| of the reference's token (the kit's number). When the other side does not have the
  reference's token in its top-k, `lp_ref - (other's k-th logprob)` — a lower bound, still finite;
- `kl`: KL(reference || other) of the two top-k distributions, with one more bucket for the rest of the
  vocabulary; a token missing from the other side's top-k is given that side's k-th probability (an upper
  bound of its true probability, so the estimate never exaggerates a divergence);
- `flip`: the other side's greedy token differs from the reference's.

Both sides are scored on the reference's token sequence (pdctl.parity.teacher), so one flip does not
cascade into the positions after it. `sequence_position` is the absolute position in the sequence
(prompt length + output index), where the position-resolved report places it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

_TINY = 1e-12


@dataclass(frozen=True)
class Scored:
    """One output position of a server's answer, scored on the reference's token at that position."""

    token: int | None  # the server's own greedy token here (None: this position could not be measured)
    ref_logprob: float | None  # its logprob of the reference's token (None: not in its top-k)
    top: dict[int, float]  # its top-k: token id -> logprob

    @property
    def measured(self) -> bool:
        return self.token is not None


@dataclass(frozen=True)
class PositionStat:
    """The divergence at one output position of one comparison."""

    index: int  # output position (0 = the first generated token)
    sequence_position: int  # prompt length + index
    delta: float  # |Δ logprob| of the reference's token (inf: not measurable)
    kl: float  # top-k KL(reference || other) (inf: not measurable)
    flip: bool  # the other side's greedy token differs from the reference's
    measured: bool = True  # False: after a flip that was not resent (no floor to judge it, or cap reached)


def topk_kl(ref_top: dict[int, float], other_top: dict[int, float]) -> float:
    """KL(ref || other) over the reference's top-k tokens plus one bucket for the rest of the vocabulary."""
    if not ref_top:
        return 0.0
    if not other_top:
        return math.inf
    floor = min(other_top.values())
    p = {t: math.exp(lp) for t, lp in ref_top.items()}
    q = {t: math.exp(other_top.get(t, floor)) for t in ref_top}
    p_rest = max(0.0, 1.0 - sum(p.values()))
    q_rest = max(_TINY, 1.0 - sum(q.values()))
    kl = sum(pt * math.log(pt / max(q[t], _TINY)) for t, pt in p.items() if pt > 0)
    if p_rest > _TINY:
        kl += p_rest * math.log(p_rest / q_rest)
    return max(0.0, kl)


def position_stat(index: int, prompt_len: int, ref_token: int, ref_logprob: float | None,
                  ref_top: dict[int, float], other: Scored) -> PositionStat:
    """The divergence of OTHER from the reference at output position INDEX."""
    seq = prompt_len + index
    if not other.measured or ref_logprob is None:
        return PositionStat(index, seq, math.inf, math.inf, False, measured=False)
    if other.ref_logprob is not None:
        delta = abs(other.ref_logprob - ref_logprob)
    elif other.top:
        delta = max(0.0, ref_logprob - min(other.top.values()))  # lower bound: the token is below its top-k
    else:
        delta = math.inf
    return PositionStat(index, seq, delta, topk_kl(ref_top, other.top), other.token != ref_token)


# -- summaries ----------------------------------------------------------------------------------------------
QUANTILES = (0.5, 0.9, 0.99)


def quantile(values: Sequence[float], q: float) -> float:
    """The Q-quantile of VALUES (linear interpolation, numpy's default); 0.0 for no values."""
    xs = sorted(values)
    if not xs:
        return 0.0
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    if math.isinf(xs[hi]) or math.isinf(xs[lo]):
        return xs[hi] if pos > lo else xs[lo]
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    """Every position of a set of comparisons, summarised."""

    positions: int
    flips: int
    unmeasured: int
    mean_kl: float
    kl_quantiles: dict[str, float]
    delta_quantiles: dict[str, float]
    max_delta: float

    @property
    def flip_rate(self) -> float:
        """Flips per measured position."""
        measured = self.positions - self.unmeasured
        return self.flips / measured if measured else 0.0

    def document(self) -> dict[str, object]:
        return {"positions": self.positions, "unmeasured": self.unmeasured, "flips": self.flips,
                "flip_rate": round(self.flip_rate, 6),
                "mean_kl": _json(self.mean_kl), "kl_quantiles": {k: _json(v) for k, v in self.kl_quantiles.items()},
                "delta_quantiles": {k: _json(v) for k, v in self.delta_quantiles.items()},
                "max_delta": _json(self.max_delta)}


def _json(value: float) -> float | None:
    return None if not math.isfinite(value) else float(value)


def summarize(stats: Iterable[PositionStat]) -> Summary:
    """Quantiles, mean KL and flips of STATS (a mode's, a control's, a soak round's positions)."""
    items = list(stats)
    kls = [s.kl for s in items]
    deltas = [s.delta for s in items]
    finite = [k for k in kls if math.isfinite(k)]
    mean_kl = math.inf if len(finite) < len(kls) else (sum(finite) / len(finite) if finite else 0.0)
    return Summary(
        positions=len(items), flips=sum(s.flip for s in items), unmeasured=sum(not s.measured for s in items),
        mean_kl=mean_kl,
        kl_quantiles={f"p{int(q * 100)}": quantile(kls, q) for q in QUANTILES},
        delta_quantiles={f"p{int(q * 100)}": quantile(deltas, q) for q in QUANTILES},
        max_delta=max(deltas, default=0.0),
    )
