"""End to end, local executor: `pdctl launch` (foreground) of the local CPU topology — reference engine
prefill TP2 -> decode TP1 over NIXL, real sglang-router — then the launcher is SIGKILLed, and status,
logs, /generate and `pdctl down` still work from the state on disk; down leaves no pid alive."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pdctl.executors.local import group_members
from tests.support.launch_e2e import generate, pdctl, wait_state
from tests.support.launch_samples import local_cpu
from tests.support.orphans import assert_no_orphans, group_pids, live_pids, started_records

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("e2e-local")
    topo = local_cpu(tmp, ref_checkpoint, name="e2e-local")
    run_dir = tmp / ".pdctl" / "runs" / "e2e-local"  # the default run dir, relative to where pdctl runs
    launcher = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "launch", str(topo), "--timeout", "180"],
        cwd=tmp,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        state = wait_state(run_dir, "running", 200, launcher)
        # pdctl itself dies (no chance to clean up): the servers must stay up and `down` must still work
        launcher.send_signal(signal.SIGKILL)
        launcher.wait(timeout=10)
        yield {"tmp": tmp, "run_dir": run_dir, "state": state, "topo": topo}
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait(timeout=10)
        if (run_dir / "state.json").exists():
            from pdctl.launch.shutdown import teardown

            teardown(run_dir, grace_s=5)


def test_state_records_every_process(deployment: dict) -> None:
    state = deployment["state"]
    assert state["topology"] == "e2e-local" and state["run_dir"] == str(deployment["run_dir"].resolve())
    assert [(p["role"], p["replica"], p["node"], p["executor"]) for p in state["processes"]] == [
        ("prefill", 0, "local", "local"),
        ("decode", 0, "local", "local"),
    ]
    for record in started_records(deployment["run_dir"]):
        assert record["pgid"] == record["pid"] and group_members(record["pgid"])
        assert Path(record["log"]).exists()
    plan = json.loads((deployment["run_dir"] / "plan.json").read_text())
    assert [p["name"] for p in plan["processes"]] == ["prefill-0", "decode-0"]


def test_generate_through_the_router(deployment: dict) -> None:
    out = generate(deployment["state"]["router"]["url"], max_new_tokens=4)
    assert out["meta_info"]["completion_tokens"] == 4
    assert len(out["output_ids"]) == 4 and isinstance(out["text"], str)


def test_status_reports_all_healthy(deployment: dict) -> None:
    done = pdctl("status", "--json", "-", cwd=deployment["tmp"])  # latest run, no --run-dir
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is True and doc["router"]["healthy"] is True
    assert [(p["role"], p["healthy"]) for p in doc["processes"]] == [("prefill", True), ("decode", True)]
    assert all(p["pid"] and p["url"] for p in doc["processes"])


def test_logs_by_role(deployment: dict) -> None:
    # (UCX's protocol tables, which `pdctl status` reads the KV path from, follow the header: tail enough)
    done = pdctl("logs", "prefill:0", "--tail", "2000", cwd=deployment["tmp"])
    assert done.returncode == 0 and "# pdctl: " in done.stdout and "pdctl.reference" in done.stdout
    router = pdctl("logs", "router", "--tail", "5", cwd=deployment["tmp"])
    assert router.returncode == 0 and router.stdout.strip()
    bad = pdctl("logs", "nonsense:1", cwd=deployment["tmp"])
    assert bad.returncode == 2 and "unknown process 'nonsense:1'" in bad.stderr


def test_relaunch_into_a_running_run_dir_is_refused(deployment: dict) -> None:
    done = pdctl("launch", str(deployment["topo"]), "--detach", "--skip-compat", cwd=deployment["tmp"])
    assert done.returncode == 2
    assert "still running" in " ".join(done.stderr.split()) and "pdctl down" in done.stderr
    assert json.loads((deployment["run_dir"] / "state.json").read_text())["status"] == "running"


def test_down_leaves_no_process_and_is_idempotent(deployment: dict) -> None:
    records = started_records(deployment["run_dir"])
    pids = group_pids(records)
    assert len(pids) >= 3 and live_pids(pids) == pids
    done = pdctl("down", cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    assert "router" in done.stdout and "stopped" in done.stdout
    assert live_pids(pids) == set(), f"left behind: {live_pids(pids)}"
    assert_no_orphans(deployment["run_dir"])
    again = pdctl("down", cwd=deployment["tmp"])
    assert again.returncode == 0 and "not running" in again.stdout
    status = pdctl("status", "--json", "-", cwd=deployment["tmp"])
    assert status.returncode == 1 and json.loads(status.stdout)["ok"] is False
    assert not any(os.path.exists(f"/proc/{pid}/cmdline") and live_pids({pid}) for pid in pids)
