"""Slurm as clusters run it, on a real multi-node Slurm: slurmctld on namespaced host c, a slurmd on hosts a and
b (tests/support/slurm_cluster.py), each node declaring gres gpu:2. The topology gives its two nodes by count
(no host) with partition, time and gres: `pdctl launch --submit` sbatches one job, which takes the job's nodes
in order (a -> prefill node, b -> decode node), reads each node's address on the node, runs preflight there
through srun and starts every process as an srun step; /generate, status and down work, and the processes
really ran on their nodes. Then the same topology is launched with `--in-allocation` inside `salloc`."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests

from tests.support.launch_e2e import wait_state
from tests.support.netns import netns_missing_reason
from tests.support.orphans import pids_with
from tests.support.slurm_cluster import slurm_missing_reason
from tests.support.slurm_pd import slurm_reference_pd
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason() or slurm_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]
SLURM = {"partition": "pd13", "time_limit": "00:15:00", "gres": "gpu:2", "exclusive": False}


def _pdctl(env: dict[str, str], *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdctl", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    """The hosts, their Slurm, and the topology: two nodes by count, the router on the prefill node."""
    with slurm_reference_pd(tmp_path_factory.mktemp("slurm-multinode"), ref_checkpoint, name="slurm-multinode",
                            slurm=SLURM, hosts="abc", controller="c", gpus=4, prefill_tp=2) as found:
        yield found


@pytest.fixture(scope="module")
def job(cluster: dict):
    run_dir = cluster["tmp"] / "run"
    try:
        done = _pdctl(cluster["env"], "launch", str(cluster["topo"]), "--submit", "--run-dir", str(run_dir),
                      "--timeout", "240", "--json", "-", cwd=cluster["tmp"], timeout=420)
        assert done.returncode == 0, done.stderr[-4000:] + cluster["slurm"].logs()
        state = json.loads((run_dir / "state.json").read_text())
        assert json.loads(done.stdout)["job_id"] == state["job_id"]
        yield {**cluster, "run_dir": run_dir, "state": state, "stderr": done.stderr}
    finally:
        if (run_dir / "state.json").exists():
            _pdctl(cluster["env"], "down", "--run-dir", str(run_dir), cwd=cluster["tmp"], timeout=120)



def _pids_set(text: str) -> set[int]:
    return set(pids_with(text))


def _netns_pids(netns: str) -> set[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return {int(p) for p in out.split()}


def _on_their_nodes(state: dict, mh) -> None:
    """prefill on host a, decode on host b, each advertising the address read on its node."""
    for role, letter in (("prefill", "a"), ("decode", "b")):
        port = 30000 if role == "prefill" else 30100
        pids = _pids_set(f"--role {role}") & _pids_set(f"--port {port}")
        assert pids and pids <= _netns_pids(mh[letter].netns), f"{role} is not running on node {letter}"
        record = next(r for r in state["processes"] if r["role"] == role)
        assert record["host"] == mh[letter].hostname and record["url"] == f"http://{mh[letter].address}:{port}"


def _generate(url: str) -> None:
    response = requests.post(url + "/generate", timeout=120, json={
        "text": "The capital of France is", "sampling_params": {"max_new_tokens": 3, "temperature": 0.0,
                                                                 "ignore_eos": True}})
    assert response.status_code == 200 and response.json()["meta_info"]["completion_tokens"] == 3


def test_the_job_checked_its_nodes_first(job: dict) -> None:
    """check-compat, then preflight through srun on the nodes the job was given, relayed as it happened."""
    stderr = " ".join(job["stderr"].split())
    assert "job | preflight passed: 2 node(s)" in stderr and "transfer pa -> db" in stderr, job["stderr"][-3000:]
    assert "tcp/pd0 (inter-node)" in stderr


def test_one_job_by_count_places_prefill_and_decode_on_different_nodes(job: dict) -> None:
    state, mh = job["state"], job["mh"]
    assert state["executor"] == "slurm" and state["status"] == "running" and state["job_owned"]
    script = (job["run_dir"] / "launch.sbatch").read_text().splitlines()
    for line in ("#SBATCH --nodes=2", "#SBATCH --partition=pd13", "#SBATCH --time=00:15:00", "#SBATCH --gres=gpu:2"):
        assert line in script
    assert not [line for line in script if line.startswith("#SBATCH --nodelist")]
    squeue = subprocess.run(["squeue", "-h", "-j", state["job_id"], "-o", "%T %D %b"], env=job["env"],
                            capture_output=True, text=True, timeout=30, check=False).stdout.split()
    assert squeue[:2] == ["RUNNING", "2"] and "gpu:2" in squeue[2]  # one job, two nodes, the gres it asked for
    assert state["nodes"] == {"pa": {"host": mh["a"].hostname, "advertise": mh["a"].address},
                              "db": {"host": mh["b"].hostname, "advertise": mh["b"].address}}
    _on_their_nodes(state, mh)


def test_generate_metrics_status_and_down(job: dict) -> None:
    state = job["state"]
    _generate(state["router"]["url"])
    metrics = requests.get(state["router"]["metrics_url"], timeout=30)
    assert metrics.status_code == 200 and "# TYPE" in metrics.text
    assert state["router"]["metrics_url"] == f"http://{job['mh']['a'].address}:8001/metrics"
    status = _pdctl(job["env"], "status", "--run-dir", str(job["run_dir"]), "--json", "-", cwd=job["tmp"])
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)  # from this machine, which is not the job's: through the job's state
    assert doc["ok"] and "tcp/pd0" in next(p for p in doc["processes"] if p["role"] == "prefill")["transfer_path"]
    down = _pdctl(job["env"], "down", "--run-dir", str(job["run_dir"]), cwd=job["tmp"], timeout=120)
    assert down.returncode == 0, down.stderr
    assert not _pids_set("--role prefill") & _netns_pids(job["mh"]["a"].netns)
    assert job["slurm"].squeue().strip() == ""


def test_in_allocation_inside_salloc_and_down_from_another_machine(cluster: dict, job: dict) -> None:
    """After the submitted job is down: the same topology inside `salloc --nodes=2` (an interactive job), launched
    detached from its shell; then `pdctl status` and `pdctl down` from another machine (host c), which reach the
    steps through Slurm (by step name: the allocation is the user's, so it is left alone)."""
    down = _pdctl(cluster["env"], "down", "--run-dir", str(job["run_dir"]), cwd=cluster["tmp"], timeout=120)
    assert down.returncode == 0 and cluster["slurm"].squeue().strip() == ""  # the nodes (and their gres) are free
    run_dir = cluster["tmp"] / "run-salloc"
    launch = [sys.executable, "-m", "pdctl", "launch", str(cluster["topo"]), "--in-allocation", "--run-dir",
              str(run_dir), "--timeout", "240", "--detach"]
    shell = 'trap "exit 0" TERM; "$@" && while :; do sleep 1; done'  # the interactive shell, after the launch
    argv = ["salloc", "--partition=pd13", "--time=00:15:00", "--nodes=2", "--gres=gpu:2", "bash", "-c", shell,
            "bash", *launch]
    salloc = subprocess.Popen(argv, cwd=cluster["tmp"], env=cluster["env"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, start_new_session=True)
    mh = cluster["mh"]
    try:
        state = wait_state(run_dir, "running", 300, salloc)
        assert not state["job_owned"]
        _on_their_nodes(state, mh)
        _generate(state["router"]["url"])
        elsewhere = ["env", f"SLURM_CONF={cluster['slurm'].conf}", sys.executable, "-m", "pdctl"]
        status = mh["c"].run([*elsewhere, "status", "--run-dir", str(run_dir), "--json", "-"], timeout=120, check=False)
        assert status.returncode == 0 and json.loads(status.stdout)["ok"], status.stderr[-2000:]
        down = mh["c"].run([*elsewhere, "down", "--run-dir", str(run_dir)], timeout=180, check=False)
        assert down.returncode == 0 and "stopped" in down.stdout, down.stdout + down.stderr
        assert not _pids_set("--role decode") & _netns_pids(mh["b"].netns)
        assert not _pids_set("--role prefill") & _netns_pids(mh["a"].netns)
        assert salloc.poll() is None and "RUNNING" in cluster["slurm"].squeue()  # the user's allocation goes on
    finally:  # the user leaves the interactive shell; salloc gives the allocation back
        if salloc.poll() is None:
            for child in Path(f"/proc/{salloc.pid}/task/{salloc.pid}/children").read_text().split():
                os.kill(int(child), signal.SIGTERM)
            try:
                salloc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(salloc.pid, signal.SIGKILL)
                salloc.wait(timeout=30)
