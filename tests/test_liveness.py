"""pdctl.liveness end to end: a decode worker killed (kill -9) under a real deployment while `pdctl eval gsm8k`
runs (issue 20). Before: eval retried for 94 s and blamed "No available prefill workers", `status` said the
router had 2/2 workers healthy, and a second eval started anyway. Now: eval stops at the first failed
requests naming the dead process (role, replica, node, pid) with its log tail and the results path; status's
router row counts the workers really serving; a new eval, parity or bench serve refuses up front (exit 1)."""

from __future__ import annotations

import json
import os
import re
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


def test_a_stopped_process_that_does_not_answer_is_named_hung(tmp_path: Path) -> None:
    """A real HTTP server (python -m http.server: any answer, a 404 too, is an answer) named hung once it is
    stopped (SIGSTOP: state T), and answering again after SIGCONT; an eval's Watchdog waits HANG_AFTER_S for a
    silent process that is not stopped."""
    from pdctl.errors import CheckFailed
    from pdctl.executors.local import proc_stat
    from pdctl.liveness import HealthClock, Watchdog, check_run, require_alive
    from tests.support.net import free_port, wait_for

    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    port = free_port()
    log = run_dir / "logs" / "decode-0.log"
    with open(log, "w") as fh:
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"],
                                  stdout=fh, stderr=subprocess.STDOUT, start_new_session=True, cwd=tmp_path)
    try:
        url = f"http://127.0.0.1:{port}"
        record = {"name": "decode-0", "role": "decode", "replica": 0, "node": "local", "pid": server.pid,
                  "pgid": server.pid, "start_time": proc_stat(server.pid)[2], "executor": "local", "log": str(log),
                  "url": url, "health_path": "/health"}
        (run_dir / "state.json").write_text(json.dumps({"topology": "t", "run_dir": str(run_dir),
                                                        "status": "running", "processes": [record], "router": {}}))
        from pdctl.liveness import answers

        wait_for(lambda: answers(url + "/health"), timeout=60, what="the stand-in server to answer")
        assert check_run(run_dir, clock=HealthClock()).ok
        os.kill(server.pid, signal.SIGSTOP)
        try:
            verdict = check_run(run_dir, clock=HealthClock())
            (hung,) = verdict.dead
            assert hung.hung and hung.hung_for_s >= 3.0 and hung.state == "T", hung  # one probe of 3 s
            assert re.fullmatch(rf"decode:0 \(decode-0, node local, pid {server.pid}\) is hung: no answer to its "
                                r"health check for \d+ s, process state T \(stopped\)", hung.describe()), hung.describe()
            with pytest.raises(CheckFailed, match=r"has a hung process: decode:0 .* is hung.*kill -CONT"):
                require_alive(run_dir, "eval gsm8k")
            assert check_run(run_dir).ok  # without a health clock: only exits count (pdctl runs)
            from pdctl.launch.status import live, run_watch

            state = json.loads((run_dir / "state.json").read_text())
            watch, clock = run_watch(run_dir, state), HealthClock()
            first = live(run_dir, state, watch, clock=clock)["processes"][0]
            again = live(run_dir, state, watch, clock=clock)["processes"][0]  # status --watch: the next refresh
            assert first["state"] == again["state"] == "hung" and again["proc_state"] == "T"
            assert again["unanswered_s"] > first["unanswered_s"] >= 3.0  # how long, counted across refreshes
        finally:
            os.kill(server.pid, signal.SIGCONT)
        assert check_run(run_dir, clock=HealthClock()).ok
        assert Watchdog(run_dir).dead() is None
    finally:
        server.kill()
        server.wait()


def test_a_silent_process_that_is_not_stopped_is_hung_only_after_hang_after_s() -> None:
    """The clock: silence counts from the first unanswered question and resets on any answer."""
    from pdctl.liveness import HealthClock

    clock = HealthClock()
    start = time.monotonic()
    first = clock.unanswered_for("decode-0", False, start - 12.0)
    assert first is not None and first >= 12.0
    assert clock.unanswered_for("decode-0", False, time.monotonic()) >= 12.0  # counted from the first
    assert clock.unanswered_for("decode-0", True, time.monotonic()) is None
    assert clock.unanswered_for("decode-0", False, time.monotonic()) < 1.0  # a new silence


SLOW_HEALTH = """
import sys, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
class Slow(BaseHTTPRequestHandler):
    def do_GET(self):
        time.sleep(float(sys.argv[2]))  # SGLang's /health runs a one-token generate: seconds on a loaded machine
        self.send_response(200)
        self.end_headers()
    def log_message(self, *args):
        pass
ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Slow).serve_forever()
"""


def test_a_running_server_whose_health_check_answers_late_is_not_named_hung(tmp_path: Path) -> None:
    """A real HTTP server whose /health answers only after 5 s, as SGLang's (a generate through the scheduler) does
    on a loaded machine: with the render's `health_timeout_s` (SGLang: its SGLANG_HEALTH_CHECK_TIMEOUT + 5 s) it is
    alive for `require_alive`, the watchdog's last look and status; a record without it (a 3 s probe) called the
    same server hung — the false alarm parity raised against real SGLang under load."""
    from pdctl.executors.local import proc_stat
    from pdctl.launch.status import live, run_watch
    from pdctl.liveness import HealthClock, check_run
    from pdctl.sglang.facts import health_answers_within
    from tests.support.net import free_port, wait_for

    run_dir = tmp_path / "run"
    (run_dir / "logs").mkdir(parents=True)
    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SLOW_HEALTH, str(port), "5"], start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: proc_stat(server.pid) is not None and _listening(port), timeout=60,
                 what="the slow server to listen")
        record = {"name": "decode-0", "role": "decode", "replica": 0, "node": "local", "pid": server.pid,
                  "pgid": server.pid, "start_time": proc_stat(server.pid)[2], "executor": "local",
                  "log": str(run_dir / "logs" / "decode-0.log"), "url": url, "health_path": "/health"}

        def write(rec: dict) -> dict:
            state = {"topology": "t", "run_dir": str(run_dir), "status": "running", "processes": [rec], "router": {}}
            (run_dir / "state.json").write_text(json.dumps(state))
            return state

        write(record)  # the record of an older run (no health_timeout_s): a 3 s probe, the 5 s answer is "hung"
        (silent,) = check_run(run_dir, clock=HealthClock()).dead
        assert silent.hung and silent.state != "T", silent
        state = write(record | {"health_timeout_s": health_answers_within({})})
        assert check_run(run_dir, clock=HealthClock()).ok  # require_alive's and the last look's rule: one probe
        row = live(run_dir, state, run_watch(run_dir, state), clock=HealthClock())["processes"][0]
        assert row["state"] == "healthy", row
    finally:
        server.kill()
        server.wait()


def _listening(port: int) -> bool:
    import socket

    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0
