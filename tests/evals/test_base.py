"""An eval is its data, prompt and scorer (pdctl.evals.base.Eval): a second eval, written here in a few lines,
runs through the same session, client, runner, results file and summary as gsm8k, against the real reference
engine. Its own rates appear in the verdict, its results file carries its scorer's fields, and a floor its
answers miss fails it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from pdctl.evals.base import Eval, EvalData, Item
from pdctl.evals.gsm8k import GSM8K
from pdctl.evals.registry import EVALS
from pdctl.evals.results import read_records
from pdctl.evals.session import EvalOptions, execute, prepare
from tests.support import servers


def _load(*, data_file: object, shots_file: object, num_questions: int, num_shots: int) -> EvalData:
    items = [Item(i, f"Repeat the letter {c}:", c) for i, c in enumerate("abcdefgh")]
    return EvalData(items[:num_questions], [], "letters", "none")


LETTERS = Eval(
    name="letters", load=_load, prompts=lambda data: [item.question for item in data.questions], stop=("\n",),
    score=lambda output, item: {"correct": output.strip() == item.answer, "said_something": bool(output.strip())},
    defaults={"num_questions": 8, "num_shots": 0, "max_new_tokens": 4, "parallel": 4, "floor": 1.0},
    rates={"said_something": "said_something"},
)


def test_gsm8k_is_registered_by_name() -> None:
    assert EVALS == {"gsm8k": GSM8K} and GSM8K.rates and GSM8K.labels["accuracy"] == "accuracy (SGLang)"


@pytest.fixture(scope="module")
def ref_url(ref_checkpoint: Path) -> Iterator[str]:
    with servers.start_reference_server(ref_checkpoint, role="colocated", tp=1) as srv:
        yield srv.url


@pytest.mark.e2e
def test_another_eval_runs_through_the_shared_parts(ref_url: str, tmp_path: Path) -> None:
    results = tmp_path / "letters.jsonl"
    prep = prepare(LETTERS, EvalOptions(url=ref_url, results=str(results)))
    assert prep.request.stop == ("\n",) and [j.prompt for j in prep.jobs][:2] == ["Repeat the letter a:",
                                                                                   "Repeat the letter b:"]
    summary, outcome, records = execute(prep)
    assert len(records) == 8 and not outcome.interrupted and summary["answered"] == 8
    assert "said_something" in summary and "strict_accuracy" not in summary  # its rates, not gsm8k's
    assert {"correct", "said_something", "output", "key"} <= set(read_records(results)[0])
    # the tiny random reference model does not repeat letters: the floor of 1.0 fails the verdict
    assert not summary["ok"] and any("floor" in r for r in summary["reasons"])
