"""Prompt format (SGLang's few_shot_gsm8k text, byte for byte) and data loading rules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.evals.gsm8k.data import Item, load_eval_data, read_jsonl, sibling_train_file
from pdctl.evals.gsm8k.prompt import STOP, build_prompt, few_shot_prefix
from tests.support.paths import DATA

TEST_FILE = DATA / "gsm8k_test_50.jsonl"
TRAIN_FILE = DATA / "gsm8k_train_20.jsonl"


def _sglang_prompt(shot_lines: list[dict], line: dict, k: int) -> str:
    """SGLang 0.5.23 test/few_shot_gsm8k.py get_one_example/get_few_shot_examples, verbatim logic (oracle)."""

    def get_one_example(lines: list[dict], i: int, include_answer: bool) -> str:
        ret = "Question: " + lines[i]["question"] + "\nAnswer:"
        if include_answer:
            ret += " " + lines[i]["answer"]
        return ret

    few = "".join(get_one_example(shot_lines, i, True) + "\n\n" for i in range(k))
    return few + get_one_example([line], 0, False)


def test_prompt_is_sglang_few_shot_text() -> None:
    shots = read_jsonl(TRAIN_FILE)[:5]
    item = read_jsonl(TEST_FILE)[0]
    raw = [json.loads(x) for x in TRAIN_FILE.read_text().splitlines()][:5]
    expected = _sglang_prompt(raw, json.loads(TEST_FILE.read_text().splitlines()[0]), 5)
    assert build_prompt(few_shot_prefix(shots), item) == expected
    assert expected.count("Question: ") == 6 and expected.endswith("\nAnswer:")
    assert STOP == ("Question", "Assistant:", "<|separator|>")


def test_zero_shots_is_just_the_question() -> None:
    item = Item(index=0, question="What is 2+2?", answer="#### 4")
    assert build_prompt(few_shot_prefix([]), item) == "Question: What is 2+2?\nAnswer:"


def test_data_file_takes_shots_from_the_train_file_next_to_it() -> None:
    assert sibling_train_file(TEST_FILE) == DATA / "gsm8k_train_20.jsonl"
    data = load_eval_data(data_file=TEST_FILE, shots_file=None, num_questions=10, num_shots=3)
    assert [q.index for q in data.questions] == list(range(10))
    assert data.shots == read_jsonl(TRAIN_FILE)[:3]
    assert data.shots_source.endswith("gsm8k_train_20.jsonl")


def test_data_file_alone_excludes_its_own_shots(tmp_path: Path) -> None:
    lone = tmp_path / "questions.jsonl"
    shutil.copy(TEST_FILE, lone)
    data = load_eval_data(data_file=lone, shots_file=None, num_questions=None, num_shots=5)
    assert [s.index for s in data.shots] == [0, 1, 2, 3, 4]
    assert [q.index for q in data.questions] == list(range(5, 50))  # examples are never asked


def test_shots_file_wins(tmp_path: Path) -> None:
    shots = tmp_path / "my_shots.jsonl"
    shots.write_text("".join(json.dumps({"question": f"q{i}", "answer": f"#### {i}"}) + "\n" for i in range(3)))
    data = load_eval_data(data_file=TEST_FILE, shots_file=shots, num_questions=4, num_shots=2)
    assert [s.question for s in data.shots] == ["q0", "q1"]
    assert len(data.questions) == 4


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"question": "q", "answer": "#### 1"}\nnot json\n', ":2: not valid JSON"),
        ('{"question": "q"}\n', 'string "question" and "answer"'),
        ("", "no GSM8K items"),
        ('{"question": "q", "answer": "no number"}\n', "no numeric answer"),
    ],
)
def test_bad_data_file_is_a_user_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(UserError, match=message):
        load_eval_data(data_file=path, shots_file=None, num_questions=None, num_shots=0)


def test_too_many_shots_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="only 20 examples"):
        load_eval_data(data_file=TEST_FILE, shots_file=None, num_questions=1, num_shots=21)
    with pytest.raises(UserError, match="cannot read GSM8K data file"):
        load_eval_data(data_file=tmp_path / "nope.jsonl", shots_file=None, num_questions=1, num_shots=0)
