"""What a Slurm user of srtctl expects of the job script, run by a real multi-node Slurm on namespaced hosts
(tests/support/slurm_cluster.py; hosts a and b, x86_64 like this machine):

- the submit host says it is aarch64 (a Grace login node), the job's nodes are x86_64: the job finds no
  interpreter for its node, builds pdctl's venv there (flock, venv + pip from the submitter's checkout) and
  runs the whole launch from it — check-compat, preflight on the nodes, the servers, the router;
- prefill.env / decode.env / router.env reach only their role's processes, on their nodes;
- `#SBATCH --segment` goes to sbatch as rendered: this Slurm (22.05) has no --segment and refuses it, and
  pdctl says how to switch it off (slurm.segment: false).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests
import yaml

from pdctl.launch.submit import write_script
from pdctl.render.jobpython import Submitter
from pdctl.topology import load_topology
from tests.support.launch_e2e import pdctl
from tests.support.multihost import MAIN_ENV, start_multihost
from tests.support.netns import netns_missing_reason
from tests.support.orphans import pids_with
from tests.support.paths import REPO
from tests.support.slurm_cluster import slurm_missing_reason, start_slurm
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason() or slurm_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]
SLURM = {"partition": "pd13", "time_limit": "00:15:00", "gres": "gpu:2", "exclusive": False}
ENV = {"engine": {"SHARED": "engine", "COMMON": "1"}, "prefill": {"ONLY": "prefill", "SHARED": "prefill"},
       "decode": {"ONLY": "decode", "SGLANG_DECODE_BOOTSTRAP_TIMEOUT": "600"}, "router": {"ROUTER_ONLY": "1"}}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("slurm-job")
    mh = start_multihost(tmp)
    try:
        slurm = start_slurm(mh.cluster, tmp / "slurm", controller="c", nodes="ab")
        base = getattr(sys, "_base_executable", sys.executable)
        doc = {
            "name": "slurm-job",
            "engine": {"kind": "reference", "python": mh.python, "env": ENV["engine"]},
            "model": {"path": str(ref_checkpoint)},
            "slurm": {**SLURM, "job_venv": str(tmp / "venvs"), "job_base_python": base,
                      # offline: pdctl from the submitter's checkout, its dependencies from PYTHONPATH below
                      "job_pip_args": ["--no-index", "--no-deps", "--no-build-isolation"]},
            "nodes": [{"name": "pa", "gpu": "cpu", "gpus": 4}, {"name": "db", "gpu": "cpu", "gpus": 4}],
            "transfer": {"backend": "nixl"},
            "server": {"page_size": 16},
            "prefill": {"nodes": ["pa"], "tp": 1, "port": 30000, "env": ENV["prefill"]},
            "decode": {"nodes": ["db"], "tp": 1, "port": 30100, "env": ENV["decode"]},
            "router": {"node": "pa", "host": "0.0.0.0", "port": 8000, "env": ENV["router"]},
        }
        topo = tmp / "slurm-job.yaml"
        topo.write_text(yaml.safe_dump(doc, sort_keys=False))
        site = next(MAIN_ENV.glob("lib/python3*/site-packages"))
        yield {"mh": mh, "slurm": slurm, "env": {**slurm.env(), "PYTHONPATH": str(site)}, "tmp": tmp, "topo": topo}
    finally:
        mh.stop()


def _wait_running(run_dir: Path, job_id: str, cluster: dict, timeout: float = 600) -> dict:
    """state.json of the job's launch once it says running; the job's output if the job ends first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        state_file = run_dir / "state.json"
        if state_file.exists():
            state = json.loads(state_file.read_text())
            if state.get("status") == "running":
                return state
        if cluster["slurm"].squeue().strip() == "":
            break
        time.sleep(0.5)
    out = "\n".join(p.read_text()[-4000:] for p in run_dir.glob("slurm-*.out"))
    raise AssertionError(f"job {job_id} not running (output:)\n{out}\n{cluster['slurm'].logs()}")


@pytest.fixture(scope="module")
def job(cluster: dict):
    """The job as a Grace login node would render it (Submitter: aarch64), submitted with sbatch."""
    run_dir = cluster["tmp"] / "run"
    grace = Submitter("/shared/pdctl-aarch64/bin/python", "aarch64", str(REPO), "e2e")
    topo = load_topology(cluster["topo"])
    script = write_script(topo, run_dir, timeout=300, submitter=grace)
    done = subprocess.run(["sbatch", "--parsable", str(script)], env=cluster["env"], cwd=cluster["tmp"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().split(";")[0]
    try:
        yield {**cluster, "run_dir": run_dir, "job_id": job_id, "state": _wait_running(run_dir, job_id, cluster)}
    finally:
        pdctl("down", "--run-dir", str(run_dir), cwd=cluster["tmp"], timeout=180, env=cluster["env"])
        subprocess.run(["scancel", job_id], env=cluster["env"], capture_output=True, timeout=60, check=False)


def test_a_node_of_another_architecture_runs_pdctl_from_a_venv_the_job_built(job: dict) -> None:
    venv = job["tmp"] / "venvs" / "pdctl-e2e-x86_64"
    out = (job["run_dir"] / f"slurm-{job['job_id']}.out").read_text()
    assert "pdctl job: no pdctl interpreter for x86_64 (slurm.job_python); building" in out
    assert f"is x86_64; pdctl runs with {venv}/bin/python" in out
    assert (venv / ".pdctl-ready").exists() and (venv / "lib").is_dir()
    assert job["state"]["status"] == "running" and job["state"]["executor"] == "slurm"
    assert "preflight passed" in out  # the job's pdctl checked its nodes, from the venv it built
    response = requests.post(job["state"]["router"]["url"] + "/generate", timeout=120, json={
        "text": "The capital of France is", "sampling_params": {"max_new_tokens": 3, "temperature": 0.0,
                                                                 "ignore_eos": True}})
    assert response.status_code == 200 and response.json()["meta_info"]["completion_tokens"] == 3


def _environ(pattern: str, host) -> dict[str, str]:
    """The environment of the process on HOST whose command line has PATTERN."""
    here = subprocess.run(["ip", "netns", "pids", host.netns], capture_output=True, text=True, check=True).stdout
    pids = [p for p in pids_with(pattern) if str(p) in here.split()]
    assert pids, f"no process with {pattern!r} on {host.hostname}"
    raw = Path(f"/proc/{pids[0]}/environ").read_bytes().split(b"\0")
    return dict(item.decode().split("=", 1) for item in raw if b"=" in item)


def test_each_role_runs_with_its_own_env(job: dict) -> None:
    mh = job["mh"]
    prefill, decode = _environ("--port 30000", mh["a"]), _environ("--port 30100", mh["b"])
    # sglang_router's setproctitle overwrites the memory /proc/<pid>/environ shows: the router's environment is
    # read from what the job rendered and started it with (the servers' prove that this environment arrives)
    plan = json.loads((job["run_dir"] / "plan.json").read_text())
    router = plan["router"]["env"]
    for env, role in ((prefill, "prefill"), (decode, "decode")):
        assert env["ONLY"] == role and env["COMMON"] == "1" and "ROUTER_ONLY" not in env
    assert prefill["SHARED"] == "prefill" and decode["SHARED"] == "engine"
    assert decode["SGLANG_DECODE_BOOTSTRAP_TIMEOUT"] == "600" and "SGLANG_DECODE_BOOTSTRAP_TIMEOUT" not in prefill
    assert router["ROUTER_ONLY"] == "1" and router["SHARED"] == "engine" and "ONLY" not in router
    assert "SGLANG_DECODE_BOOTSTRAP_TIMEOUT" not in router
    assert {p["role"]: p["env"].get("ONLY") for p in plan["processes"]} == {"prefill": "prefill", "decode": "decode"}


def test_the_nvlink_segment_reaches_sbatch(cluster: dict) -> None:
    """Rendered as written: Slurm 22.05 has no --segment and refuses the job; pdctl names the switch."""
    run_dir = cluster["tmp"] / "run-segment"
    done = pdctl("launch", str(cluster["topo"]), "--submit", "--set", "slurm.segment=2",
                 "--run-dir", str(run_dir), "--skip-preflight", cwd=cluster["tmp"], env=cluster["env"])
    assert "#SBATCH --segment=2" in (run_dir / "launch.sbatch").read_text().splitlines()
    assert done.returncode == 1, done.stderr
    assert "--segment" in done.stderr and "slurm.segment: false" in done.stderr
    off = pdctl("launch", str(cluster["topo"]), "--dry-run", "--set", "slurm.segment=false",
                "--set", "nodes[0].gpu=cpu", "--run-dir", str(run_dir), cwd=cluster["tmp"], env=cluster["env"])
    assert off.returncode == 0 and "--segment" not in off.stdout
