"""Scoring one GSM8K completion three ways, so that users can tell a broken deployment from a chatty model.

`accuracy` follows SGLang's few_shot_gsm8k exactly (the last run of digits, commas removed), because that is
the number SGLang's own CI and release notes quote. `strict` and `flexible` follow lm-eval's gsm8k task
(`strict-match` / `flexible-extract` filters, then `exact_match` with its `regexes_to_ignore`), because a
reasoning model such as gpt-oss rarely writes `#### N` (strict ~0) yet ends on the right number (flexible
high): showing both separates "the model answers in another format" from "the deployment is broken".
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

#: SGLang's marker for "no number in the output" (few_shot_gsm8k.INVALID).
INVALID = -9999999
#: lm-eval's RegexFilter fallback when the pattern does not match.
LM_EVAL_INVALID = "[invalid]"

_DIGITS = re.compile(r"\d+")
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")
# lm-eval gsm8k exact_match: regexes_to_ignore, applied in this order to prediction and reference alike.
_IGNORE = (re.compile(","), re.compile(r"\$"), re.compile(r"(?s).*#### "), re.compile(r"\.$"))


def get_answer_value(text: str) -> int:
    """SGLang's few_shot_gsm8k.get_answer_value: the last integer in TEXT (commas removed), else INVALID.

    Kept bug-for-bug (no sign, a decimal's fractional digits count as the last integer, a leading-zero
    number such as "007" is INVALID) so that pdctl's `accuracy` is comparable with SGLang's published numbers.
    """
    numbers = _DIGITS.findall(text.replace(",", ""))
    if not numbers:
        return INVALID
    try:
        value = ast.literal_eval(numbers[-1])
    except (SyntaxError, ValueError):
        return INVALID
    return int(value)


def label_value(answer: str) -> int:
    """The integer label of a GSM8K reference answer ("... #### 1,234" -> 1234), via SGLang's rule."""
    return get_answer_value(answer)


def _regex_filter(pattern: re.Pattern[str], text: str, group_select: int) -> str:
    """lm-eval's RegexFilter.apply for one response: pick a match, first non-empty group, strip."""
    matches = pattern.findall(text)
    if not matches:
        return LM_EVAL_INVALID
    match = matches[group_select]
    if isinstance(match, tuple):
        groups = [m for m in match if m]
        match = groups[0] if groups else LM_EVAL_INVALID
    return match.strip()


def strict_extract(text: str) -> str:
    """lm-eval gsm8k `strict-match`: the first `#### N` in TEXT, or "[invalid]"."""
    return _regex_filter(_STRICT, text, 0)


def flexible_extract(text: str) -> str:
    """lm-eval gsm8k `flexible-extract`: the last number-like match in TEXT, or "[invalid]"."""
    return _regex_filter(_FLEXIBLE, text, -1)


def normalize(text: str) -> str:
    """lm-eval gsm8k exact_match normalisation: drop ',', '$', everything up to '#### ', a trailing '.'; lower."""
    for pattern in _IGNORE:
        text = pattern.sub("", text)
    return text.lower()


@dataclass(frozen=True)
class Score:
    """The three verdicts on one completion, and what each extracted (kept in the per-item JSONL)."""

    pred: int
    label: int
    correct: bool
    invalid: bool
    strict_pred: str
    strict_correct: bool
    flexible_pred: str
    flexible_correct: bool


def score(output: str, answer: str) -> Score:
    """Score OUTPUT (the model's completion) against ANSWER (the GSM8K reference text with `#### N`)."""
    label = label_value(answer)
    pred = get_answer_value(output)
    reference = normalize(answer)
    strict_pred = strict_extract(output)
    flexible_pred = flexible_extract(output)
    return Score(
        pred=pred,
        label=label,
        correct=pred == label,
        invalid=pred == INVALID,
        strict_pred=strict_pred,
        strict_correct=normalize(strict_pred) == reference,
        flexible_pred=flexible_pred,
        flexible_correct=normalize(flexible_pred) == reference,
    )
