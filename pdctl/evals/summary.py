"""The verdict of an eval: CLI.md's JSON document, computed from the per-item records alone.

Why from the records: the same function then summarises a fresh run, a resumed one (old lines + new ones), and
a results file read back later, and a reader can recompute every number from the JSONL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any


def _fraction(records: Sequence[dict], key: str) -> float:
    return sum(1 for r in records if r.get(key)) / len(records) if records else 0.0


def summarize(
    records: Sequence[dict],
    *,
    num_questions: int,
    floor: float | None,
    max_errors: int | None,
    wall_s: float,
    new_completion_tokens: int,
    interrupted: bool = False,
    rates: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """CLI.md's eval document over RECORDS (one per answered question).

    Rates are fractions of the answered records (all NUM_QUESTIONS unless interrupted). `latency_s` and
    `output_throughput` measure this process only (WALL_S, NEW_COMPLETION_TOKENS): a resumed eval's earlier
    part ran at another time. `ok` = complete, accuracy >= floor (when one is set), errors <= max_errors
    (when set). RATES: the eval's other fractions (pdctl.evals.base.Eval.rates: key -> the record field counted).
    """
    answered = len(records)
    errors = sum(1 for r in records if r.get("error"))
    accuracy = _fraction(records, "correct")
    complete = answered == num_questions and not interrupted
    reasons: list[str] = []
    if not complete:
        reasons.append(f"only {answered} of {num_questions} questions answered")
    if floor is not None and accuracy < floor:
        reasons.append(f"accuracy {accuracy:.3f} < floor {floor:g}")
    if max_errors is not None and errors > max_errors:
        reasons.append(f"{errors} requests failed (allowed: {max_errors})")
    tokens = sum(int(r.get("completion_tokens") or 0) for r in records)
    return {
        "ok": not reasons,
        "accuracy": accuracy,
        **{key: _fraction(records, record_field) for key, record_field in (rates or {}).items()},
        "num_questions": num_questions,
        "answered": answered,
        "correct": sum(1 for r in records if r.get("correct")),
        "errors": errors,
        "floor": floor,
        "latency_s": round(wall_s, 3),
        "output_throughput": new_completion_tokens / wall_s if wall_s > 0 else 0.0,
        "completion_tokens": tokens,
        "interrupted": interrupted,
        "reasons": reasons,
    }
