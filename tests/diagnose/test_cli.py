"""`pdctl diagnose` over a run dir whose processes are real local processes (one stopped with SIGSTOP, as the
fault suite stops a prefill) and real log files: the table, the JSON, the exit codes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from pdctl.cli.diagnose import diagnose
from pdctl.executors.local import proc_stat
from tests.support.net import wait_for

WAITING = ("[2026-12-03 10:45:00 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='a' decode_req.req."
           "bootstrap_room=7 with exception KVTransferError(bootstrap_room=7): Request 7 timed out after 300.0s in "
           "KVPoll.WaitingForInput")


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen]]:
    procs = [subprocess.Popen(["sleep", "120"], start_new_session=True) for _ in range(2)]
    try:
        yield procs
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)  # a stopped process dies of SIGKILL too
            p.wait()


def run_dir(tmp: Path, procs: list[subprocess.Popen], logs: dict[str, str]) -> Path:
    records = []
    for (name, text), proc in zip(logs.items(), procs):
        (tmp / f"{name}.log").write_text(text + "\n")
        records.append({"name": name, "role": name.split("-")[0], "replica": 0, "node": "local", "pid": proc.pid,
                        "pgid": proc.pid, "start_time": proc_stat(proc.pid)[2], "log": str(tmp / f"{name}.log")})
    (tmp / "state.json").write_text(json.dumps({"status": "running", "processes": records}))
    return tmp


def test_a_stopped_prefill_is_the_root_cause_of_decodes_timeout(tmp_path: Path, sleepers) -> None:
    rd = run_dir(tmp_path, sleepers, {"prefill-0": "2026-12-03 10:40:00 INFO prefill up",
                                      "decode-0": f"2026-12-03 10:40:00 INFO decode up\n{WAITING}"})
    os.killpg(sleepers[0].pid, signal.SIGSTOP)
    wait_for(lambda: (proc_stat(sleepers[0].pid) or "?")[0] == "T", timeout=30, what="the sleeper to stop")
    done = CliRunner().invoke(diagnose, ["--run-dir", str(rd), "--json", "-"])
    assert done.exit_code == 1, done.output
    doc = json.loads(done.stdout)
    assert [(f["process"], f["signature"]) for f in doc["findings"]] == [("prefill-0", "stopped"),
                                                                          ("decode-0", "sglang-waiting-timeout")]
    assert doc["findings"][1]["explanation"] == "decode-0's sglang-waiting-timeout follows prefill-0's stopped"
    assert "kill -CONT" in doc["findings"][0]["fix"]
    table = CliRunner().invoke(diagnose, ["--run-dir", str(rd)])
    assert table.exit_code == 1 and "prefill-0" in table.output and "SGLANG_DISAGGREGATION_WAITING" in table.output


def test_a_healthy_run_exits_0_and_an_unknown_failure_exits_1(tmp_path: Path, sleepers) -> None:
    rd = run_dir(tmp_path, sleepers, {"prefill-0": "2026-12-03 10:40:00 INFO fine",
                                      "decode-0": "2026-12-03 10:40:00 INFO fine"})
    done = CliRunner().invoke(diagnose, ["--run-dir", str(rd), "--json", "-"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.stdout) == {"failed": False, "checked": 2, "findings": []}
    (rd / "prefill-0.log").write_text("2026-12-03 10:40:00 INFO up\nTraceback (most recent call last):\n"
                                      "ZeroDivisionError: division by zero\n")
    os.killpg(sleepers[0].pid, signal.SIGSTOP)  # failed (stopped), but its log's error is no known signature
    wait_for(lambda: (proc_stat(sleepers[0].pid) or "?")[0] == "T", timeout=30, what="the sleeper to stop")
    doc = json.loads(CliRunner().invoke(diagnose, ["--run-dir", str(rd), "--json", "-"]).stdout)
    assert doc["findings"][0]["signature"] == "stopped"  # its stop is known; the traceback before it is not
    (rd / "state.json").write_text((rd / "state.json").read_text().replace('"running"', '"stopped"'))
    doc = json.loads(CliRunner().invoke(diagnose, ["--run-dir", str(rd), "--json", "-"]).stdout)
    assert doc["findings"] == [] and not doc["failed"]  # after `pdctl down` a stop is pdctl's, the log is read only
