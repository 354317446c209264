"""`pdctl launch --executor slurm --submit` against a real single-node Slurm (scripts/slurm/single-node.sh).

If no Slurm answers already, the module starts the single-node Slurm itself (root + the Debian packages
slurmctld slurmd slurm-client munge, which scripts/system-deps.sh installs as root) and stops it afterwards;
a Slurm that was already up is used and left running. Skipped, with the reason, where neither is possible."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.launch_e2e import generate, pdctl
from tests.support.launch_samples import REPO, local_cpu

SINGLE_NODE = REPO / "scripts" / "slurm" / "single-node.sh"
PACKAGES = {"sbatch": "slurm-client", "sinfo": "slurm-client", "slurmctld": "slurmctld", "slurmd": "slurmd"}


def _which(tool: str) -> str | None:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin:/usr/bin")


def _slurm_up() -> bool:
    try:
        done = subprocess.run(["sinfo", "-h", "-o", "%T"], check=False, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and any(s in done.stdout for s in ("idle", "mix", "alloc"))


def _cannot_start() -> str | None:
    """Why this machine cannot run the real Slurm test (None if it can)."""
    missing = sorted({pkg for tool, pkg in PACKAGES.items() if _which(tool) is None})
    if _which("munged") is None:
        missing.append("munge")
    if missing:
        return (f"Slurm packages not installed ({' '.join(missing)}): run scripts/system-deps.sh as root "
                "(make system-deps)")
    if os.geteuid() != 0 and not _slurm_up():
        return "no Slurm running and not root: the single-node Slurm (scripts/slurm/single-node.sh) needs root"
    return None


pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(_cannot_start() is not None, reason=str(_cannot_start())),
]


@pytest.fixture(scope="module", autouse=True)
def slurm() -> Iterator[None]:
    """A Slurm that answers: the one already running, else the single-node one, stopped in teardown."""
    if _slurm_up():
        yield
        return
    done = subprocess.run(
        ["bash", str(SINGLE_NODE), "start"], check=False, capture_output=True, text=True, timeout=120
    )
    try:
        assert done.returncode == 0, f"single-node Slurm did not start: {done.stdout}{done.stderr}"
        yield
    finally:
        stop = subprocess.run(
            ["bash", str(SINGLE_NODE), "stop"], check=False, capture_output=True, text=True, timeout=120
        )
        assert stop.returncode == 0, f"single-node Slurm did not stop: {stop.stdout}{stop.stderr}"


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
        assert state["topology_path"] == str(topo.resolve()) and (run_dir / "topology.yaml").is_file()
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
