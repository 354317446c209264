"""Bad input ends in a clear message and exit 2; settings come from the topology; resume bookkeeping."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.evals.defaults import eval_defaults
from pdctl.evals.gsm8k import GSM8K
from pdctl.evals.results import ResultsWriter, read_records, resumable
from pdctl.evals.summary import summarize
from tests.support.net import free_port
from tests.support.paths import REPO as ROOT

TEST_FILE = ROOT / "tests" / "data" / "gsm8k_test_50.jsonl"


def _pdctl(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pdctl", "eval", "gsm8k", *args], capture_output=True, text=True,
                          timeout=60, cwd=cwd, check=False)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1:{port}", "--data-file", str(TEST_FILE)], "cannot reach http://127.0.0.1"),
        (["--url", "127.0.0.1:8000", "--data-file", str(TEST_FILE)], "must start with http://"),
        (["--url", "http://127.0.0.1:{port}", "--num-questions", "0", "--data-file", str(TEST_FILE)],
         "--num-questions must be a positive integer"),
        (["--url", "http://127.0.0.1:{port}", "--resume", "--data-file", str(TEST_FILE)], "--resume needs"),
        (["--data-file", str(TEST_FILE)], "no latest run recorded"),
        (["--run-dir", "nowhere"], "not a pdctl run directory"),
        (["--url", "http://127.0.0.1:{port}", "--data-file", "missing.jsonl"], "cannot read GSM8K data file"),
        (["--url", "http://127.0.0.1:{port}", "--topology", "missing.yaml"], "does not exist"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path: Path, args: list[str], message: str) -> None:
    port = str(free_port())  # nothing listens there
    out = _pdctl(*[a.replace("{port}", port) for a in args], cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert message in " ".join(out.stderr.split()), out.stderr
    assert "Traceback" not in out.stderr


def test_defaults_from_a_topology_file() -> None:
    values, source = eval_defaults(GSM8K, ROOT / "configs" / "local-cpu.yaml")
    assert values["num_questions"] == 20 and values["max_new_tokens"] == 64 and values["parallel"] == 16
    assert values["floor"] is None and "local-cpu.yaml" in source


def test_defaults_from_a_run_dir(tmp_path: Path) -> None:
    topo = (ROOT / "configs" / "local-cpu.yaml").read_text().replace(
        "parallel: 16}", "parallel: 16, floor: 0.5}")
    (tmp_path / "topology.yaml").write_text(topo)
    values, _ = eval_defaults(GSM8K, None, tmp_path, {"topology": "local-cpu"})
    assert values["floor"] == 0.5 and values["num_questions"] == 20
    # a recorded path wins over the copy; a block recorded in state.json is used when there is no file
    values, source = eval_defaults(GSM8K, None, tmp_path / "empty", {"eval": {"gsm8k": {"floor": 0.25}}})
    assert values["floor"] == 0.25 and "state.json" in source
    values, source = eval_defaults(GSM8K, None, tmp_path / "empty", {})
    assert values == GSM8K.defaults and source == "built-in defaults"


def test_a_run_whose_topology_cannot_be_read_is_an_error_not_a_lost_floor(tmp_path: Path) -> None:
    """Issue 16: the floor of an unreadable topology vanished and the eval exited 0 (a false OK)."""
    gone = tmp_path / "moved-away.yaml"
    with pytest.raises(UserError, match="cannot be read any more"):
        eval_defaults(GSM8K, None, tmp_path / "run", {"topology_path": str(gone)})
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "topology.yaml").write_text("name: [unterminated\n")
    with pytest.raises(UserError, match="cannot be read, so its eval settings"):
        eval_defaults(GSM8K, None, tmp_path / "broken", {})


def test_eval_cli_refuses_a_run_whose_topology_is_gone(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    state = {"topology": "t", "run_dir": str(run), "topology_path": str(tmp_path / "gone.yaml"), "processes": [],
             "router": {"url": f"http://127.0.0.1:{free_port()}"}}
    (run / "state.json").write_text(json.dumps(state))
    out = _pdctl("--run-dir", str(run), "--data-file", str(ROOT / "tests/data/gsm8k_test_50.jsonl"),
                 cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "cannot be read any more" in " ".join(out.stderr.split()) and "Traceback" not in out.stderr


def _rec(index: int, key: str, correct: bool, error: str | None = None, tokens: int = 4) -> dict:
    return {"index": index, "key": key, "correct": correct, "strict_correct": False, "flexible_correct": correct,
            "invalid": error is not None, "error": error, "completion_tokens": tokens}


def test_resume_keeps_finished_items_and_drops_errors_and_torn_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    lines = [_rec(0, "k0", True), _rec(1, "k1", False, error="HTTP 500"), _rec(2, "k2", False)]
    path.write_text("".join(json.dumps(r) + "\n" for r in lines) + '{"index": 3, "ke')  # killed mid-write
    kept = resumable(path, {0: "k0", 1: "k1", 2: "k2", 3: "k3"})
    assert sorted(kept) == [0, 2]
    writer = ResultsWriter(path, keep=list(kept.values()))
    writer.write(_rec(1, "k1", True))
    writer.close()
    assert [r["index"] for r in read_records(path)] == [0, 2, 1]  # rewritten: no torn line, no stale error
    with pytest.raises(UserError, match="other settings"):
        resumable(path, {0: "other", 1: "k1", 2: "k2"})


def test_resume_reads_line_separators_in_outputs_and_a_line_torn_inside_a_character(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    writer = ResultsWriter(path)
    writer.write({**_rec(0, "k0", True), "output": "one\u2028two\x85three"})  # written raw (ensure_ascii=False)
    writer.close()
    torn = json.dumps({**_rec(1, "k1", True), "output": "é"}, ensure_ascii=False).encode()
    path.write_bytes(path.read_bytes() + torn[: torn.index("é".encode()) + 1])  # killed inside the "é"
    records = read_records(path)
    assert [r["index"] for r in records] == [0] and records[0]["output"] == "one\u2028two\x85three"
    assert sorted(resumable(path, {0: "k0", 1: "k1"})) == [0]


def test_summary_counts() -> None:
    records = [_rec(0, "a", True), _rec(1, "b", False, error="x", tokens=0), _rec(2, "c", True), _rec(3, "d", False)]
    doc = summarize(records, num_questions=4, floor=0.6, max_errors=0, wall_s=2.0, new_completion_tokens=12,
                    rates=GSM8K.rates)
    assert (doc["accuracy"], doc["flexible_accuracy"], doc["invalid"], doc["errors"]) == (0.5, 0.5, 0.25, 1)
    assert doc["output_throughput"] == 6.0 and not doc["ok"] and len(doc["reasons"]) == 2
    doc = summarize(records, num_questions=4, floor=0.5, max_errors=None, wall_s=2.0, new_completion_tokens=12)
    assert doc["ok"] and doc["reasons"] == []
    doc = summarize(records[:2], num_questions=4, floor=None, max_errors=None, wall_s=1.0, new_completion_tokens=0,
                    interrupted=True)
    assert not doc["ok"] and "only 2 of 4" in doc["reasons"][0]


def test_a_run_whose_router_is_down_exits_2(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "state.json").write_text(json.dumps({"topology": "t", "processes": [],
                                                    "router": {"url": f"http://127.0.0.1:{free_port()}"}}))
    out = _pdctl("--run-dir", str(run_dir), "--data-file", str(TEST_FILE), cwd=tmp_path)
    err = " ".join(out.stderr.split())
    assert out.returncode == 2 and "does not answer" in err and "pdctl status" in err, out.stderr
