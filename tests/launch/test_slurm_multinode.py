"""`pdctl launch --executor slurm --submit` on a real multi-node Slurm: slurmctld on namespaced host c, a slurmd
on hosts a and b (tests/support/slurm_cluster.py). The topology names the hosts by their Slurm node names and
gives each its address (advertise_host); preflight runs first through srun on the nodes, then one sbatch job
places prefill on node a (with the router) and decode on node b; /generate, status and down work, and the
processes really ran on their nodes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import requests
import yaml

from tests.support.multihost import start_multihost
from tests.support.netns import netns_missing_reason
from tests.support.slurm_cluster import slurm_missing_reason, start_slurm
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason() or slurm_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]


def _pdctl(env: dict[str, str], *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    import sys

    return subprocess.run([sys.executable, "-m", "pdctl", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def job(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("slurm-multinode")
    mh = start_multihost(tmp)
    run_dir = tmp / "run"
    try:
        slurm = start_slurm(mh.cluster, tmp / "slurm", controller="c", nodes="ab")
        env = slurm.env()
        doc = {
            "name": "slurm-multinode",
            "engine": {"kind": "reference", "python": mh.python},
            "model": {"path": str(ref_checkpoint)},
            "nodes": [{"name": name, "host": mh[x].hostname, "advertise_host": mh[x].address, "gpu": "cpu", "gpus": 4}
                      for x, name in (("a", "pa"), ("b", "db"))],
            "transfer": {"backend": "nixl"},
            "server": {"page_size": 16},
            "prefill": {"nodes": ["pa"], "tp": 2, "port": 30000},
            "decode": {"nodes": ["db"], "tp": 1, "port": 30100},
            "router": {"node": "pa", "host": "0.0.0.0", "port": 8000},
        }
        topo = tmp / "slurm-multinode.yaml"
        topo.write_text(yaml.safe_dump(doc, sort_keys=False))
        done = _pdctl(env, "launch", str(topo), "--executor", "slurm", "--submit", "--skip-compat",
                      "--run-dir", str(run_dir), "--timeout", "240", "--json", "-", cwd=tmp, timeout=420)
        assert done.returncode == 0, done.stderr[-4000:] + slurm.logs()
        state = json.loads((run_dir / "state.json").read_text())
        yield {"mh": mh, "slurm": slurm, "env": env, "tmp": tmp, "run_dir": run_dir, "state": state,
               "stderr": done.stderr}
    finally:
        try:
            if (run_dir / "state.json").exists():
                _pdctl(slurm.env() if "slurm" in locals() else dict(os.environ), "down", "--run-dir", str(run_dir),
                       cwd=tmp, timeout=120)
        finally:
            mh.stop()


def _pids_with(text: str) -> set[int]:
    pids = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline and not cmdline.startswith("srun") and "-m pytest" not in cmdline:
                pids.add(int(entry))
    return pids


def _netns_pids(netns: str) -> set[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return {int(p) for p in out.split()}


def test_preflight_ran_through_srun_first(job: dict) -> None:
    assert "preflight passed" in job["stderr"] and "transfer pa -> db" in job["stderr"], job["stderr"][-2000:]
    assert "tcp/pd0 (inter-node)" in job["stderr"]


def test_one_job_places_prefill_and_decode_on_different_nodes(job: dict) -> None:
    state, mh = job["state"], job["mh"]
    assert state["executor"] == "slurm" and state["status"] == "running"
    script = (job["run_dir"] / "launch.sbatch").read_text()
    assert f"#SBATCH --nodelist={mh['a'].hostname},{mh['b'].hostname}" in script
    squeue = subprocess.run(["squeue", "-h", "-j", state["job_id"], "-o", "%T %D"], env=job["env"],
                            capture_output=True, text=True, timeout=30, check=False).stdout.split()
    assert squeue == ["RUNNING", "2"]  # one job, two nodes
    for role, letter in (("prefill", "a"), ("decode", "b")):
        port = 30000 if role == "prefill" else 30100
        pids = _pids_with(f"--role {role}") & _pids_with(f"--port {port}")
        assert pids and pids <= _netns_pids(mh[letter].netns), f"{role} is not running on node {letter}"
        record = next(r for r in state["processes"] if r["role"] == role)
        assert record["host"] == mh[letter].hostname and record["url"] == f"http://{mh[letter].address}:{port}"


def test_generate_status_and_down(job: dict) -> None:
    response = requests.post(job["state"]["router"]["url"] + "/generate", timeout=120, json={
        "text": "The capital of France is", "sampling_params": {"max_new_tokens": 3, "temperature": 0.0,
                                                                 "ignore_eos": True}})
    assert response.status_code == 200 and response.json()["meta_info"]["completion_tokens"] == 3
    status = _pdctl(job["env"], "status", "--run-dir", str(job["run_dir"]), "--json", "-", cwd=job["tmp"])
    assert status.returncode == 0, status.stderr
    doc = json.loads(status.stdout)
    assert doc["ok"] and "tcp/pd0" in next(p for p in doc["processes"] if p["role"] == "prefill")["transfer_path"]
    down = _pdctl(job["env"], "down", "--run-dir", str(job["run_dir"]), cwd=job["tmp"], timeout=120)
    assert down.returncode == 0, down.stderr
    assert not _pids_with("--role prefill") & _netns_pids(job["mh"]["a"].netns)
    assert job["slurm"].squeue().strip() == ""
