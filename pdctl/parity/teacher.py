"""Teacher forcing: score a server's answer on the reference's own token sequence, so one flip does not cascade.

Why: parity generates greedily on both sides. Once the candidate picks another token at position j (a
near-tie that rounding tipped), every later position continues from a different context and says nothing
more about the deployment — the kit therefore stops comparing there, and a 4-token output could say little.
Here a flip at j is scored (both distributions at j come from the same context), and then the server is
asked again with the prompt followed by the reference's tokens up to and including j as input ids
(`logprob_start_len` at the last prompt token, so the prefix cache may serve the shared part, as SGLang
allows), continuing where the reference continued. Decode still computes every position after the first,
from KV the prefill transferred, so a PD deployment is measured at every position of every output.

Each resend costs one request; after `max_resyncs` resends the rest of the output is "not measured" (a
flip at each: a server that cannot follow the reference's text for that long is not at the floor).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pdctl.parity.divergence import Scored
from pdctl.parity.prompts import Prompt

DEFAULT_MAX_RESYNCS = 8

Resend = Callable[[list[int], int], "dict[str, Any] | str"]  # (input ids, max_new_tokens) -> meta | error


@dataclass(frozen=True)
class RefSequence:
    """The reference's answer to one prompt: the sequence every other answer is scored on."""

    prompt_ids: list[int] | None  # None: a text prompt whose ids the reference did not return
    tokens: list[int]
    logprobs: list[float | None]
    tops: list[dict[int, float]]

    @property
    def prompt_len(self) -> int:
        return len(self.prompt_ids or [])


def _items(meta: dict[str, Any], key: str) -> list[list[Any]]:
    value = meta.get(key) or []
    return [v for v in value if isinstance(v, (list, tuple))] if isinstance(value, list) else []


def _lp(item: Any) -> float | None:
    if isinstance(item, (list, tuple)) and item and isinstance(item[0], (int, float)) and not isinstance(item[0], bool):
        return float(item[0])
    return None


def _tok(item: Any) -> int | None:
    if isinstance(item, (list, tuple)) and len(item) > 1 and isinstance(item[1], int):
        return item[1]
    return None


def _top(entries: Any) -> dict[int, float]:
    out: dict[int, float] = {}
    for e in entries or []:
        lp, tok = _lp(e), _tok(e)
        if lp is not None and tok is not None:
            out[tok] = lp
    return out


def reference_sequence(prompt: Prompt, meta: dict[str, Any]) -> RefSequence:
    """The reference's tokens, logprobs and top-k from its meta_info (prompt ids from the prompt, else from
    its input_token_logprobs, which a logprob_start_len 0 request returns for every prompt token)."""
    out = _items(meta, "output_token_logprobs")
    tops = meta.get("output_top_logprobs") or []
    ids = list(prompt.input_ids) if prompt.input_ids is not None else None
    if ids is None:
        inputs = [_tok(i) for i in _items(meta, "input_token_logprobs")]
        ids = [t for t in inputs if t is not None] or None
        if ids is not None and len(ids) != int(meta.get("prompt_tokens") or len(ids)):
            ids = None
    tokens = [t if (t := _tok(i)) is not None else -1 for i in out]
    logprobs = [_lp(i) for i in out]
    top_k = [_top(tops[k]) if k < len(tops) else {} for k in range(len(out))]
    for tok, lp, top in zip(tokens, logprobs, top_k):
        if lp is not None:
            top.setdefault(tok, lp)  # its own token is in its distribution, even without top_logprobs
    return RefSequence(prompt_ids=ids, tokens=tokens, logprobs=logprobs, tops=top_k)


def _scored(meta: dict[str, Any], ref: RefSequence, offset: int) -> list[Scored]:
    """META's output positions, scored on the reference's tokens from position OFFSET on."""
    items = _items(meta, "output_token_logprobs")
    tops = meta.get("output_top_logprobs") or []
    out: list[Scored] = []
    for k, item in enumerate(items):
        pos = offset + k
        if pos >= len(ref.tokens):
            break
        tok, lp = _tok(item), _lp(item)
        top = _top(tops[k]) if k < len(tops) else {}
        if tok is not None and lp is not None:
            top.setdefault(tok, lp)
        want = ref.tokens[pos]
        out.append(Scored(tok, lp if tok == want else top.get(want), top))
    return out


@dataclass
class Forced:
    """A server's answer scored position by position on the reference's sequence."""

    meta: dict[str, Any] | None  # the first send's meta_info (cached_tokens, input logprobs): None on error
    scored: list[Scored] = field(default_factory=list)
    resyncs: int = 0
    error: str | None = None  # the request (or a resend) failed
    short: bool = False  # the server generated fewer tokens than asked
    capped: bool = False  # max_resyncs reached: the rest was not measured
    decided: bool = False  # already beyond the floor's threshold: the rest was not measured


def force(first: dict[str, Any] | str, ref: RefSequence, resend: Resend | None, *,
          max_resyncs: int = DEFAULT_MAX_RESYNCS, decided: Callable[[list[Scored]], bool] | None = None) -> Forced:
    """Score FIRST (a server's answer to the prompt) on REF; after a flip, RESEND the prompt plus the
    reference's tokens so far and continue (None: no resends — a text prompt without known ids).

    DECIDED(scored so far) -> True stops resending: the verdict is already certain (the positions scored so
    far alone put the comparison beyond the floor's threshold; the rest, not measured, can only add to it)."""
    if isinstance(first, str):
        return Forced(None, error=first)
    n = len(ref.tokens)
    forced = Forced(first)
    answer: dict[str, Any] = first
    while True:
        offset = len(forced.scored)
        items = _scored(answer, ref, offset)
        flipped = False
        for s in items:
            forced.scored.append(s)
            if s.token != ref.tokens[len(forced.scored) - 1]:
                flipped = True
                break
        done = len(forced.scored)
        if done >= n:
            return forced
        if not flipped:  # fewer tokens than the reference: the rest is not there to measure
            forced.short = True
            break
        if decided is not None and decided(forced.scored):
            forced.decided = True
            break
        if resend is None or ref.prompt_ids is None or forced.resyncs >= max_resyncs:
            forced.capped = True
            break
        forced.resyncs += 1
        again = resend(ref.prompt_ids + ref.tokens[:done], n - done)
        if isinstance(again, str):
            forced.error = f"resend after a flip at position {done - 1} failed: {again}"
            break
        answer = again
    forced.scored += [Scored(None, None, {})] * (n - len(forced.scored))
    return forced
