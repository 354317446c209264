"""pdctl.liveness end to end: a decode worker killed (kill -9) under a real deployment while `pdctl eval gsm8k`
runs (issue 20). Before: eval retried for 94 s and blamed "No available prefill workers", `status` said the
router had 2/2 workers healthy, and a second eval started anyway. Now: eval stops at the first failed
requests naming the dead process (role, replica, node, pid) with its log tail and the results path; status's
router row counts the workers really serving; a new eval, parity or bench serve refuses up front (exit 1)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.launch_e2e import pdctl, wait_state
from tests.support.launch_samples import local_cpu
from tests.support.paths import DATA

QUESTIONS = 50


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("liveness")
    topo = local_cpu(tmp, ref_checkpoint, name="liveness")
    run_dir = tmp / ".pdctl" / "runs" / "liveness"
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--skip-preflight",
                           "--timeout", "180"], cwd=tmp, capture_output=True, text=True, timeout=400, check=False)
    try:
        assert done.returncode == 0, done.stderr
        yield {"tmp": tmp, "run_dir": run_dir, "state": wait_state(run_dir, "running", 30)}
    finally:
        if (run_dir / "state.json").exists():
            from pdctl.launch.shutdown import teardown

            teardown(run_dir, grace_s=5)


def _lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return 0


@pytest.mark.e2e
def test_alive_run_is_alive(deployment: dict) -> None:
    from pdctl.liveness import Watchdog, check_run

    verdict = check_run(deployment["run_dir"])
    assert verdict.ok and verdict.checked == 3  # prefill, decode, router
    assert Watchdog(deployment["run_dir"]).dead() is None


@pytest.mark.e2e
def test_eval_stops_at_a_killed_decode_and_names_it(deployment: dict) -> None:
    results = deployment["tmp"] / "gsm8k.jsonl"
    decode = next(p for p in deployment["state"]["processes"] if p["role"] == "decode")
    proc = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "eval", "gsm8k", "--data-file", str(DATA / "gsm8k_test_50.jsonl"),
         "--num-questions", str(QUESTIONS), "--num-shots", "2", "--max-new-tokens", "32", "--parallel", "2",
         "--results", str(results)], cwd=deployment["tmp"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while _lines(results) < 2:  # the eval is under way
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "eval answered nothing"
            time.sleep(0.2)
        os.kill(decode["pid"], signal.SIGKILL)
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    flat = " ".join((out + err).split())
    assert proc.returncode == 1, flat
    assert f"decode:0 (decode-0, node local, pid {decode['pid']}) exited" in flat
    assert f"--- last lines of {decode['log']} ---" in err
    assert f"results: {results}" in flat
    assert _lines(results) < QUESTIONS  # stopped early: the rest was not asked against a dead decode


@pytest.mark.e2e
def test_status_router_row_counts_what_is_really_serving(deployment: dict) -> None:
    done = pdctl("status", "--json", "-", cwd=deployment["tmp"])
    assert done.returncode == 1
    router = json.loads(done.stdout)["router"]
    assert router["healthy"] is False and router["detail"].startswith("1/2 workers serving (decode-0 exited"), router


@pytest.mark.e2e
@pytest.mark.parametrize("command", [
    ["eval", "gsm8k", "--data-file", str(DATA / "gsm8k_test_50.jsonl"), "--num-questions", "5"],
    ["parity", "--cold", "--reference", "http://127.0.0.1:9"],
    ["bench", "serve", "--concurrency", "1"],
])
def test_a_new_command_against_a_dead_deployment_refuses_up_front(deployment: dict, command: list[str]) -> None:
    decode = next(p for p in deployment["state"]["processes"] if p["role"] == "decode")
    done = pdctl(*command, cwd=deployment["tmp"])
    flat = " ".join(done.stderr.split())
    assert done.returncode == 1, flat
    assert f"has a dead process: decode:0 (decode-0, node local, pid {decode['pid']}) exited" in flat
    assert "Traceback" not in done.stderr


def test_a_run_whose_process_exited_is_named_dead(tmp_path: Path) -> None:
    """The check itself, on a run dir whose decode process (a real one) has exited and whose prefill runs."""
    from pdctl.errors import CheckFailed
    from pdctl.executors.local import proc_stat
    from pdctl.liveness import Watchdog, check_run, require_alive

    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    alive = subprocess.Popen(["sleep", "300"], start_new_session=True)
    gone = subprocess.Popen(["true"], start_new_session=True)
    gone.wait()
    try:
        def record(role: str, proc: subprocess.Popen, start: int | None) -> dict:
            log = run_dir / "logs" / f"{role}-0.log"
            log.write_text(f"{role} log line 1\n{role} says goodbye\n")
            return {"name": f"{role}-0", "role": role, "replica": 0, "node": "local", "pid": proc.pid,
                    "pgid": proc.pid, "start_time": start, "executor": "local", "log": str(log), "url": None}

        stat = proc_stat(alive.pid)
        state = {"topology": "t", "run_dir": str(run_dir), "status": "running",
                 "processes": [record("prefill", alive, stat[2] if stat else None), record("decode", gone, 1)],
                 "router": {}}
        (run_dir / "state.json").write_text(json.dumps(state))
        verdict = check_run(run_dir)
        assert [d.describe() for d in verdict.dead] == [f"decode:0 (decode-0, node local, pid {gone.pid}) exited"]
        assert "decode says goodbye" in verdict.dead[0].tail and verdict.checked == 2
        assert Watchdog(run_dir).dead() is not None and Watchdog(None).dead() is None
        with pytest.raises(CheckFailed, match=r"eval gsm8k: the deployment of run .* has a dead process: decode:0"):
            require_alive(run_dir, "eval gsm8k")
    finally:
        alive.kill()
        alive.wait()
