"""Slurm as clusters run it, on a real single-node Slurm (scripts/slurm/single-node.sh: partition `debug`, the
node declaring gres gpu:4): `pdctl launch --submit` of a topology whose nodes are given by count, with
partition, time and gres directives and a setup line; then `pdctl launch --in-allocation` inside `salloc`.

The module starts the single-node Slurm itself (root + the Debian packages slurmctld slurmd slurm-client munge,
which scripts/system-deps.sh installs as root) and stops it afterwards; a Slurm that was already up is used
(restarted by the script only if it lacks the gres) and left running. Skipped, with the reason, where neither
is possible."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

from tests.support.launch_e2e import generate, pdctl, wait_state
from tests.support.launch_samples import REPO, local_cpu
from tests.support.orphans import pids_with

SINGLE_NODE = REPO / "scripts" / "slurm" / "single-node.sh"
PACKAGES = {"sbatch": "slurm-client", "sinfo": "slurm-client", "slurmctld": "slurmctld", "slurmd": "slurmd"}
SLURM = {"partition": "debug", "time_limit": "00:10:00", "gres": "gpu:1", "exclusive": False,
         "setup": ["export PDCTL_SETUP_MARK=ran-on-the-node"]}


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
    """The single-node Slurm with its gres (started, or made sure of); stopped in teardown if it was not up."""
    was_up = _slurm_up()
    done = subprocess.run(["bash", str(SINGLE_NODE), "start"], check=False, capture_output=True, text=True,
                          timeout=180)
    try:
        assert done.returncode == 0, f"single-node Slurm did not start: {done.stdout}{done.stderr}"
        yield
    finally:
        if not was_up:
            stop = subprocess.run(["bash", str(SINGLE_NODE), "stop"], check=False, capture_output=True, text=True,
                                  timeout=120)
            assert stop.returncode == 0, f"single-node Slurm did not stop: {stop.stdout}{stop.stderr}"


def _topology(tmp_path: Path, checkpoint: Path, name: str) -> Path:
    """The local CPU deployment with its one node given by count (no host): the job's node is assigned."""
    return local_cpu(tmp_path, checkpoint, name=name, nodes=[{"name": "local", "gpu": "cpu", "gpus": 4}],
                     router={"node": "local", "host": "0.0.0.0"}, slurm=SLURM)



def _environ(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)


def _child(pid: int) -> int:
    """The one child process of PID (the command salloc runs)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])


def _squeue(job: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job, "-o", "%T"], check=False, capture_output=True, text=True,
                          timeout=30).stdout.strip()


def _check_running(state: dict, tmp_path: Path) -> int:
    """The deployment works through its router and `pdctl status`; returns the decode server's port."""
    assert state["router"]["url"].startswith("http://127.0.0.1:")  # the node's address, read on it (one node)
    out = generate(state["router"]["url"], max_new_tokens=3)
    assert out["meta_info"]["completion_tokens"] == 3
    metrics = requests.get(state["router"]["metrics_url"], timeout=30)
    assert metrics.status_code == 200 and "# TYPE" in metrics.text  # the port the plan said, really serving
    status = pdctl("status", "--run-dir", str(Path(state["run_dir"])), "--json", "-", cwd=tmp_path)
    doc = json.loads(status.stdout)
    assert status.returncode == 0 and doc["ok"], status.stdout + status.stderr
    assert {p["executor"] for p in doc["processes"]} == {"srun"}
    return int(state["processes"][1]["url"].rsplit(":", 1)[1])


def test_submit_by_count_with_partition_time_and_gres(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = _topology(tmp_path, ref_checkpoint, "slurm-e2e")
    run_dir = tmp_path / "run"
    try:
        done = pdctl("launch", str(topo), "--submit", "--run-dir", str(run_dir), "--timeout", "150", cwd=tmp_path,
                     timeout=240)
        assert done.returncode == 0, done.stderr + done.stdout
        script = (run_dir / "launch.sbatch").read_text().splitlines()
        for line in ("#SBATCH --nodes=1", "#SBATCH --partition=debug", "#SBATCH --time=00:10:00",
                     "#SBATCH --gres=gpu:1"):
            assert line in script
        assert not [line for line in script if line.startswith("#SBATCH --nodelist")]  # by count
        assert "job | preflight passed" in done.stderr  # preflight ran in the job, on the node it was given
        state = json.loads((run_dir / "state.json").read_text())
        assert state["executor"] == "slurm" and state["status"] == "running" and state["job_owned"]
        assert state["topology_path"] == str(topo.resolve())  # the user's file, though the job ran the run dir's copy
        assert state["nodes"]["local"]["host"] == socket.gethostname().split(".")[0]  # the job's node, by count
        assert _squeue(state["job_id"]) == "RUNNING"
        decode_port = _check_running(state, tmp_path)
        decode = [p for p in pids_with(f"--port {decode_port}") if "pdctl.reference" in
                  Path(f"/proc/{p}/cmdline").read_bytes().decode(errors="replace")]
        assert decode and _environ(decode[0]).get("PDCTL_SETUP_MARK") == "ran-on-the-node"  # slurm.setup ran
        logs = pdctl("logs", "decode", "--run-dir", str(run_dir), cwd=tmp_path)
        assert logs.returncode == 0 and logs.stdout.strip()
        down = pdctl("down", "--run-dir", str(run_dir), cwd=tmp_path, timeout=120)
        assert down.returncode == 0, down.stderr
        assert pids_with(f"--port {decode_port}") == []
        assert _squeue(state["job_id"]) in ("", "CANCELLED", "COMPLETED")
    finally:
        if (run_dir / "state.json").exists():
            job = json.loads((run_dir / "state.json").read_text()).get("job_id")
            if job:
                subprocess.run(["scancel", str(job)], check=False, timeout=30)


def test_in_allocation_inside_salloc(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = _topology(tmp_path, ref_checkpoint, "slurm-salloc")
    run_dir = tmp_path / "run"
    argv = ["salloc", "--partition=debug", "--time=00:10:00", "--nodes=1", "--gres=gpu:1", sys.executable, "-m",
            "pdctl", "launch", str(topo), "--in-allocation", "--run-dir", str(run_dir), "--timeout", "150"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    salloc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        state = wait_state(run_dir, "running", 180, salloc)
        assert state["executor"] == "slurm" and not state["job_owned"]  # the user's allocation, not pdctl's job
        assert _squeue(state["job_id"]) == "RUNNING"
        decode_port = _check_running(state, tmp_path)
        os.kill(_child(salloc.pid), signal.SIGINT)  # Ctrl-C to the launch: it stops what it started, then salloc
        # ends with its command and gives the allocation back
        _, err = salloc.communicate(timeout=120)
        assert "Traceback" not in err, err[-3000:]
        assert json.loads((run_dir / "state.json").read_text())["status"] == "stopped", err[-3000:]
        assert pids_with(f"--port {decode_port}") == []
        assert _squeue(state["job_id"]) in ("", "COMPLETING", "COMPLETED")  # the allocation went with salloc
    finally:
        if salloc.poll() is None:
            os.killpg(salloc.pid, signal.SIGKILL)
            salloc.wait(timeout=30)
        if (run_dir / "state.json").exists():  # a salloc killed hard leaves its allocation behind
            job = json.loads((run_dir / "state.json").read_text()).get("job_id")
            if job:
                subprocess.run(["scancel", str(job)], check=False, timeout=30)


def test_preflight_inside_salloc_checks_the_nodes_of_the_allocation(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = _topology(tmp_path, ref_checkpoint, "slurm-preflight")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLURM_")}
    done = subprocess.run(["salloc", "--partition=debug", "--time=00:05:00", "--nodes=1", "--gres=gpu:1",
                           sys.executable, "-m", "pdctl", "preflight", str(topo), "--json", "-"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] and [n["host"] for n in report["nodes"]] == [socket.gethostname().split(".")[0]]
    assert report["nodes"][0]["facts"]["executor"] == "slurm" and report["transfers"][0]["verified"]
