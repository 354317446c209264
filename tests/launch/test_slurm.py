"""`pdctl launch --executor slurm --submit` against a real single-node Slurm (scripts/slurm/single-node.sh).

Skipped, with the reason, where no Slurm answers (CI images without slurmctld/slurmd/munge)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from tests.launch.e2e import generate, needs_pd, pdctl
from tests.launch.samples import local_cpu


def _slurm_missing() -> str | None:
    if shutil.which("sbatch") is None or shutil.which("sinfo") is None:
        return "Slurm client not installed (scripts/slurm/single-node.sh sets up a single-node Slurm)"
    try:
        done = subprocess.run(
            ["sinfo", "-h", "-o", "%T"], check=False, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        return "sinfo timed out: no slurmctld answering"
    if done.returncode != 0 or "idle" not in done.stdout and "mix" not in done.stdout:
        return f"no idle Slurm node (sinfo: {done.stdout.strip() or done.stderr.strip()})"
    return None


pytestmark = [
    pytest.mark.e2e,
    needs_pd,
    pytest.mark.skipif(_slurm_missing() is not None, reason=str(_slurm_missing())),
]


def _processes_mentioning(text: str) -> list[int]:
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = (
                    Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            if text in cmdline and "-m pytest" not in cmdline and int(entry) != os.getpid():
                pids.append(int(entry))
    return pids


def test_submit_generate_status_down(tmp_path: Path, ref_checkpoint: Path) -> None:
    node = socket.gethostname().split(".")[0]  # Slurm node name = the node's host
    topo = local_cpu(
        tmp_path,
        ref_checkpoint,
        name="slurm-e2e",
        nodes=[{"name": "local", "host": node, "gpu": "cpu", "gpus": 4}],
    )
    run_dir = tmp_path / "run"
    try:
        done = pdctl(
            "launch",
            str(topo),
            "--executor",
            "slurm",
            "--submit",
            "--run-dir",
            str(run_dir),
            "--timeout",
            "150",
            cwd=tmp_path,
            timeout=200,
        )
        assert done.returncode == 0, done.stderr + done.stdout
        state = json.loads((run_dir / "state.json").read_text())
        assert state["executor"] == "slurm" and state["job_id"] and state["status"] == "running"
        assert (run_dir / "launch.sbatch").exists()
        out = generate(state["router"]["url"], max_new_tokens=3)
        assert out["meta_info"]["completion_tokens"] == 3
        status = pdctl("status", "--run-dir", str(run_dir), "--json", "-", cwd=tmp_path)
        assert status.returncode == 0 and json.loads(status.stdout)["ok"], status.stdout + status.stderr
        logs = pdctl("logs", "decode", "--run-dir", str(run_dir), cwd=tmp_path)
        assert "--role decode" in logs.stdout or logs.stdout.strip()
        marker = state["processes"][1]["url"].rsplit(":", 1)[
            1
        ]  # the decode server (the router retitles itself)
        assert _processes_mentioning(f"--port {marker}")
        down = pdctl("down", "--run-dir", str(run_dir), cwd=tmp_path)
        assert down.returncode == 0, down.stderr
        assert _processes_mentioning(f"--port {marker}") == []
        queue = subprocess.run(
            ["squeue", "-h", "-j", state["job_id"], "-o", "%T"],
            check=False,
            capture_output=True,
            text=True,
            timeout=10,
        )
        assert queue.stdout.strip() in ("", "CANCELLED", "COMPLETED")
    finally:
        if (run_dir / "state.json").exists():
            job = json.loads((run_dir / "state.json").read_text()).get("job_id")
            if job:
                subprocess.run(["scancel", str(job)], check=False, timeout=30)
