"""`pdctl eval gsm8k` end to end against the real reference engine (colocated), directly and behind a real
fault-injecting HTTP proxy: counts, JSONL vs summary, floor, resume after SIGKILL / SIGINT, errors."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support import pd as pd_support
from tests.support import servers
from tests.support.flaky_proxy import Faults, FlakyProxy
from tests.support.paths import REPO as ROOT

pytestmark = pytest.mark.e2e

TEST_FILE = ROOT / "tests" / "data" / "gsm8k_test_50.jsonl"
QUESTIONS = [json.loads(line)["question"] for line in TEST_FILE.read_text().splitlines()]
FAST = ["--data-file", str(TEST_FILE), "--num-shots", "1", "--max-new-tokens", "8"]


@pytest.fixture(scope="module")
def ref_url(ref_checkpoint: Path) -> Iterator[str]:
    with servers.start_reference_server(ref_checkpoint, role="colocated", tp=1) as srv:
        yield srv.url


def _cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "pdctl", "eval", "gsm8k", *args]


def _pdctl(*args: str, cwd: Path | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(_cmd(*args), capture_output=True, text=True, timeout=timeout, cwd=cwd or ROOT,
                          check=False)


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _check_consistent(summary: dict, records: list[dict], n: int) -> None:
    """The summary is what the JSONL says, recomputed here field by field."""
    assert len(records) == n and sorted(r["index"] for r in records) == sorted({r["index"] for r in records})
    assert summary["num_questions"] == n and summary["answered"] == n
    assert summary["accuracy"] == pytest.approx(sum(r["correct"] for r in records) / n)
    assert summary["strict_accuracy"] == pytest.approx(sum(r["strict_correct"] for r in records) / n)
    assert summary["flexible_accuracy"] == pytest.approx(sum(r["flexible_correct"] for r in records) / n)
    assert summary["invalid"] == pytest.approx(sum(r["invalid"] for r in records) / n)
    assert summary["errors"] == sum(1 for r in records if r["error"])
    assert summary["completion_tokens"] == sum(r["completion_tokens"] for r in records)
    for r in records:
        assert r["question"] == QUESTIONS[r["index"]]
        assert r["invalid"] == (r["pred"] == -9999999)
        if not any("0" <= ch <= "9" for ch in r["output"]):
            assert r["invalid"]  # no digit at all (a digit run with a leading zero is invalid too, as in SGLang)


def test_eval_colocated(ref_url: str, tmp_path: Path) -> None:
    results, summary_path = tmp_path / "r.jsonl", tmp_path / "s.json"
    out = _pdctl("--url", ref_url, *FAST, "--num-questions", "10", "--parallel", "4",
                 "--results", str(results), "--json", str(summary_path))
    assert out.returncode == 0, out.stderr + out.stdout
    summary, records = json.loads(summary_path.read_text()), _lines(results)
    _check_consistent(summary, records, 10)
    assert sorted(r["index"] for r in records) == list(range(10))
    assert summary["ok"] and summary["errors"] == 0 and summary["floor"] is None
    assert all(0 < r["completion_tokens"] <= 8 for r in records)
    assert summary["latency_s"] > 0 and summary["output_throughput"] == pytest.approx(
        summary["completion_tokens"] / summary["latency_s"], rel=0.01)

    # Same file, other settings: --resume refuses to mix two evals.
    out = _pdctl("--url", ref_url, *FAST[:-1], "9", "--num-questions", "10", "--results", str(results), "--resume")
    assert out.returncode == 2 and "other settings" in out.stderr


def test_accuracy_under_the_floor_exits_1(ref_url: str) -> None:
    out = _pdctl("--url", ref_url, *FAST, "--num-questions", "3", "--floor", "1", "--json", "-")
    assert out.returncode == 1, out.stderr  # the reference checkpoint is a random model: accuracy < 1.0
    doc = json.loads(out.stdout)
    assert doc["ok"] is False and doc["floor"] == 1.0 and doc["num_questions"] == 3 and doc["accuracy"] < 1.0
    assert "floor" in out.stderr


def test_a_floor_no_accuracy_can_reach_is_bad_input(ref_url: str) -> None:
    """--floor 1.01 used to run the whole eval to report a certain failure; it is refused up front."""
    out = _pdctl("--url", ref_url, *FAST, "--num-questions", "3", "--floor", "1.01", "--json", "-")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "--floor" in out.stderr and "0<=x<=1" in out.stderr
    assert json.loads(out.stdout) == {"ok": False, "error": "Invalid value for '--floor': 1.01 is not in the range 0<=x<=1."}


@pytest.mark.parametrize("api", ["completion", "chat"])
def test_openai_apis(ref_url: str, api: str) -> None:
    out = _pdctl("--url", ref_url, "--api", api, *FAST, "--num-questions", "3", "--json", "-")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["api"] == api and doc["answered"] == 3 and doc["errors"] == 0 and doc["completion_tokens"] > 0


def _wait_lines(path: Path, n: int, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and len(path.read_text().splitlines()) >= n:
            return
        assert proc.poll() is None, "eval ended before it could be interrupted"
        time.sleep(0.05)
    raise TimeoutError(f"{path} did not reach {n} lines")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGINT])
def test_resume_after_interruption_asks_only_the_missing(ref_url: str, tmp_path: Path, sig: int) -> None:
    n = 6
    results = tmp_path / "r.jsonl"
    args = ["--num-questions", str(n), "--parallel", "1", "--results", str(results), *FAST]
    # A proxy that slows every answer (so the eval is mid-way when interrupted) and counts requests per question.
    with FlakyProxy(ref_url, Faults(stall={"Question: "}, stall_s=0.25)) as proxy:
        proc = subprocess.Popen(_cmd("--url", proxy.url, *args, "--json", str(tmp_path / "first.json")),
                                cwd=ROOT, start_new_session=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            _wait_lines(results, 2, proc)
            os.killpg(proc.pid, sig) if sig == signal.SIGKILL else proc.send_signal(sig)
            _, err = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        first = _lines(results)
        assert 2 <= len(first) < n
        if sig == signal.SIGINT:  # clean stop: exit 130, the summary of what finished, a hint to resume
            assert proc.returncode == 130 and b"--resume" in err
            doc = json.loads((tmp_path / "first.json").read_text())
            assert doc["interrupted"] and doc["answered"] == len(first) and not doc["ok"]
        sent_before = sum(proxy.received.values())

        out = _pdctl("--url", proxy.url, *args, "--resume", "--json", str(tmp_path / "s.json"))
        assert out.returncode == 0, out.stderr
        summary, records = json.loads((tmp_path / "s.json").read_text()), _lines(results)
        _check_consistent(summary, records, n)
        assert summary["resumed"] == len(first) and summary["asked"] == n - len(first)
        # Only the missing questions were asked again: one request each after the interruption.
        assert sum(proxy.received.values()) - sent_before == n - len(first)
        for rec in first:
            assert proxy.count(QUESTIONS[rec["index"]]) == 1, rec["index"]

    if sig == signal.SIGKILL:
        return
    # Greedy and deterministic: the resumed file holds exactly what an uninterrupted run answers.
    full = tmp_path / "full.jsonl"
    assert _pdctl("--url", ref_url, *args[:-len(FAST) - 2], "--results", str(full), *FAST).returncode == 0
    by_index = {r["index"]: r["output"] for r in _lines(full)}
    assert {r["index"]: r["output"] for r in records} == by_index


def test_faults_are_reported_as_errors_and_the_eval_finishes(ref_url: str, tmp_path: Path) -> None:
    q = QUESTIONS
    faults = Faults(always_500={q[1]}, always_drop={q[2]}, first_500={q[3]}, first_drop={q[4]}, stall={q[5]},
                    stall_s=30)
    results = tmp_path / "r.jsonl"
    with FlakyProxy(ref_url, faults) as proxy:
        out = _pdctl("--url", proxy.url, *FAST, "--num-questions", "8", "--parallel", "4", "--retries", "2",
                     "--timeout", "3", "--results", str(results), "--json", "-")
        assert proxy.count(q[1]) == 3 and proxy.count(q[2]) == 3  # 1 try + 2 retries each
        assert proxy.count(q[3]) == 2 and proxy.count(q[4]) == 2  # recovered on the first retry
        assert proxy.count(q[5]) == 3  # timed out three times
    assert out.returncode == 1, out.stderr  # errors over --max-errors 0
    doc, records = json.loads(out.stdout), {r["index"]: r for r in _lines(results)}
    _check_consistent(doc, list(records.values()), 8)
    assert doc["errors"] == 3 and "3 of 8 requests failed" in " ".join(out.stderr.split())
    assert "first failure: HTTP 500" in out.stderr and "Traceback" not in out.stderr
    assert "HTTP 500" in records[1]["error"] and records[1]["attempts"] == 3
    assert records[2]["error"] and records[2]["attempts"] == 3
    assert records[3]["error"] is None and records[3]["attempts"] == 2
    assert records[4]["error"] is None and records[4]["attempts"] == 2
    assert records[5]["error"] == "timed out after 3 s" and records[5]["attempts"] == 3


def test_run_dir_router_and_topology_floor(ref_url: str, tmp_path: Path) -> None:
    topo = (ROOT / "configs" / "local-cpu.yaml").read_text()
    topo = topo.replace("gsm8k: {num_questions: 20, num_shots: 5, max_new_tokens: 64, parallel: 16}",
                        "gsm8k: {num_questions: 3, num_shots: 1, max_new_tokens: 8, parallel: 2, floor: 1.0}")
    assert "floor: 1.0" in topo
    (tmp_path / "topo.yaml").write_text(topo)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "state.json").write_text(json.dumps({
        "topology": "local-cpu", "topology_path": str(tmp_path / "topo.yaml"), "processes": [],
        "router": {"url": ref_url}}))
    out = _pdctl("--run-dir", str(run_dir), "--data-file", str(TEST_FILE), "--json", "-", cwd=tmp_path)
    assert out.returncode == 1, out.stderr  # accuracy of a random model < the topology's floor 1.0
    doc = json.loads(out.stdout)
    assert doc["floor"] == 1.0 and doc["num_questions"] == 3 and doc["url"] == ref_url
    assert len(_lines(run_dir / "eval" / "gsm8k.jsonl")) == 3  # default results file of a run


def test_eval_through_the_router_of_a_pd_deployment(ref_checkpoint: Path, ref_url: str, tmp_path: Path) -> None:
    """Prefill TP2 -> decode TP1 behind the real sglang-router: same answers as the colocated engine."""
    n, args = 6, [*FAST, "--num-questions", "6", "--parallel", "3"]
    with pd_support.start_pd(ref_checkpoint, prefill_tp=2, decode_tp=1, backend="nixl") as pd:
        out = _pdctl("--url", pd.router_url, *args, "--results", str(tmp_path / "pd.jsonl"), "--json",
                     str(tmp_path / "pd.json"))
        assert out.returncode == 0, out.stderr + pd.log_tails()
        # The router also forwards the OpenAI API (its /v1/models gives the `model` field the router requires).
        comp = _pdctl("--url", pd.router_url, "--api", "completion", *FAST, "--num-questions", "2", "--json", "-",
                      "--results", str(tmp_path / "comp.jsonl"))
        assert comp.returncode == 0 and json.loads(comp.stdout)["answered"] == 2, comp.stderr + pd.log_tails()
    summary, records = json.loads((tmp_path / "pd.json").read_text()), _lines(tmp_path / "pd.jsonl")
    _check_consistent(summary, records, n)
    assert summary["errors"] == 0
    colocated = _pdctl("--url", ref_url, *args, "--results", str(tmp_path / "co.jsonl"))
    assert colocated.returncode == 0, colocated.stderr
    assert {r["index"]: r["output"] for r in records} == {r["index"]: r["output"] for r in _lines(tmp_path / "co.jsonl")}
