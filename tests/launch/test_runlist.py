"""`pdctl runs` (pdctl.launch.runlist): past and live runs with name, state, started and run dir; a run whose state
says running but whose processes are gone is not listed as running."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.launch_e2e import pdctl, wait_state
from tests.support.launch_samples import local_cpu


def _runs(cwd: Path) -> list[dict]:
    done = pdctl("runs", "--json", "-", cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)["runs"]


def test_no_runs_and_unreadable_runs(tmp_path: Path) -> None:
    assert _runs(tmp_path) == []
    broken = tmp_path / ".pdctl" / "runs" / "broken"
    broken.mkdir(parents=True)
    (broken / "state.json").write_text("[1, 2]")
    (row,) = _runs(tmp_path)
    assert row["state"] == "unreadable" and row["run_dir"] == str(broken.resolve())


@pytest.mark.e2e
def test_live_degraded_and_stopped_runs(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = local_cpu(tmp_path, ref_checkpoint, name="runs-e2e")
    elsewhere = tmp_path / "elsewhere" / "run"  # --run-dir outside ./.pdctl/runs: found through the history
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--skip-preflight",
                           "--run-dir", str(elsewhere), "--timeout", "180"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=400, check=False)
    try:
        assert done.returncode == 0, done.stderr
        state = wait_state(elsewhere, "running", 30)
        (row,) = _runs(tmp_path)
        assert (row["name"], row["state"], row["latest"]) == ("runs-e2e", "running", True)
        assert row["run_dir"] == str(elsewhere.resolve()) and row["started"] == state["launched_at"]
        assert row["router"] == state["router"]["url"]
        decode = next(p for p in state["processes"] if p["role"] == "decode")
        os.kill(decode["pid"], signal.SIGKILL)
        (row,) = _runs(tmp_path)
        assert row["state"] == "degraded" and f"decode:0 (decode-0, node local, pid {decode['pid']})" in row["detail"]
        table = pdctl("runs", cwd=tmp_path)
        assert "degraded" in table.stdout and "runs-e2e" in table.stdout
    finally:
        if (elsewhere / "state.json").exists():
            assert pdctl("down", "--run-dir", str(elsewhere), cwd=tmp_path).returncode == 0
    (row,) = _runs(tmp_path)
    assert row["state"] == "stopped"
