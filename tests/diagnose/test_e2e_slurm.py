"""`pdctl diagnose` of Slurm runs, on a real multi-node Slurm (tests/support/slurm_cluster.py: slurmctld and a
slurmd on namespaced hosts a and b): each run is `pdctl launch --submit` of the reference engine (prefill on the
job's first node, decode on its second, every process an srun step), diagnosed from this machine, which is not
the job's, through the run's records: the steps' logs, the job's output (slurm-<job>.out) and Slurm's record of
the job (scontrol).

- an engine failure inside the job (decode started with an invalid flag value) is named from the Slurm-launched
  decode's own log, root cause first, with its fix; the job's FAILED state follows it;
- a healthy job diagnoses as nothing failed (exit 0);
- a Slurm-level failure: the healthy job's second node goes DOWN (scontrol), Slurm ends the job NODE_FAIL and
  its slurmstepd says so in the job's output; diagnose names Slurm's cause first. (A time limit needs >= 60 s of
  job time plus slurmctld's 30 s check, and memory limits are not enforced on this cluster: TaskPlugin=task/none,
  JobAcctGatherType=jobacct_gather/none; a node failure is immediate.)
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from pdctl.launch.submit import write_script
from pdctl.topology import load_topology
from tests.support.netns import netns_missing_reason
from tests.support.slurm_cluster import slurm_missing_reason
from tests.support.slurm_pd import slurm_reference_pd
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason() or slurm_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]
# --no-requeue: a batch job whose node fails ends NODE_FAIL instead of waiting, requeued, for the node
SLURM = {"partition": "pd13", "time_limit": "00:10:00", "exclusive": False, "sbatch_directives": ["--no-requeue"]}
END_WAIT_S = 120.0


def _pdctl(env: dict[str, str], *args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pdctl", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, check=False)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    with slurm_reference_pd(tmp_path_factory.mktemp("diagnose-slurm"), ref_checkpoint, name="diagnose-slurm",
                            slurm=SLURM, hosts="ab", controller="a", gpus=1, prefill_tp=1) as found:
        yield found


def _diagnose(cluster: dict, run_dir: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = _pdctl(cluster["env"], "diagnose", "--run-dir", str(run_dir), "--json", "-", cwd=cluster["tmp"],
                  timeout=120)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done, json.loads(done.stdout)


def _gone(cluster: dict) -> None:
    """Wait (<= END_WAIT_S) until the cluster runs no job."""
    deadline = time.monotonic() + END_WAIT_S
    while cluster["slurm"].squeue().strip():
        assert time.monotonic() < deadline, f"jobs still there: {cluster['slurm'].squeue()}"
        time.sleep(0.5)


def test_1_an_engine_failure_in_the_job_is_named_from_the_steps_log(cluster: dict) -> None:
    """The job as --submit renders it, sbatched here (a failing --submit would cancel the job it follows, racing
    the job's own end: Slurm's record would then say CANCELLED, which pdctl down also leaves)."""
    doc = yaml.safe_load(cluster["topo"].read_text())
    doc["decode"]["args"] = {"transfer-timeout": "soon"}  # past check-compat (--skip-compat): the engine refuses it
    topo = cluster["tmp"] / "bad-flag.yaml"
    topo.write_text(yaml.safe_dump(doc, sort_keys=False))
    run_dir = cluster["tmp"] / "run-bad-flag"
    script = write_script(load_topology(topo), run_dir, timeout=120, skip_compat=True, skip_preflight=True)
    done = subprocess.run(["sbatch", "--parsable", str(script)], env=cluster["env"], cwd=cluster["tmp"],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    job_id = done.stdout.strip().split(";")[0]
    _gone(cluster)
    state = json.loads((run_dir / "state.json").read_text())
    assert state["status"] == "failed" and {r["executor"] for r in state["processes"]} == {"srun"}
    code, doc = _diagnose(cluster, run_dir)
    assert code.returncode == 1 and doc["failed"], code.stderr[-3000:]
    root, *rest = doc["findings"]
    assert (root["process"], root["signature"]) == ("decode-0", "ref-bad-flag"), doc["findings"]
    assert "--transfer-timeout" in root["line"] and "'soon'" in root["line"]  # the step's own log line
    assert "server.args" in root["fix"]
    job = f"slurm-job-{job_id}"
    assert [(f["process"], f["signature"], f["follows"]) for f in rest] == [(job, "slurm-job-failed", "decode-0")]
    assert f"slurm job {job_id}: FAILED" in rest[0]["line"]  # Slurm's own record of the job
    table = _pdctl(cluster["env"], "diagnose", "--run-dir", str(run_dir), cwd=cluster["tmp"])
    assert table.returncode == 1 and "ref-bad-flag" in table.stdout


@pytest.fixture(scope="module")
def healthy(cluster: dict):
    run_dir = cluster["tmp"] / "run"
    try:
        done = _pdctl(cluster["env"], "launch", str(cluster["topo"]), "--submit", "--run-dir", str(run_dir),
                      "--skip-preflight", "--timeout", "180", cwd=cluster["tmp"], timeout=360)
        assert done.returncode == 0, done.stderr[-4000:] + cluster["slurm"].logs()
        yield {**cluster, "run_dir": run_dir, "state": json.loads((run_dir / "state.json").read_text())}
    finally:
        _pdctl(cluster["env"], "down", "--run-dir", str(run_dir), cwd=cluster["tmp"], timeout=120)


def test_2_a_healthy_slurm_run_has_no_failure(healthy: dict) -> None:
    code, doc = _diagnose(healthy, healthy["run_dir"])
    assert code.returncode == 0 and not doc["failed"] and doc["findings"] == [], doc
    assert doc["checked"] == 4  # prefill, decode, router and the job itself


def test_3_a_node_failure_is_named_from_slurms_record(healthy: dict) -> None:
    node = healthy["mh"]["b"].hostname
    job_id = healthy["state"]["job_id"]
    scontrol = ["scontrol", "update", f"NodeName={node}"]
    subprocess.run([*scontrol, "State=DOWN", "Reason=pdctl-diagnose-test"], env=healthy["env"], check=True,
                   capture_output=True, timeout=30)
    try:
        _gone(healthy)
        code, doc = _diagnose(healthy, healthy["run_dir"])
    finally:
        subprocess.run([*scontrol, "State=RESUME"], env=healthy["env"], check=False, capture_output=True, timeout=30)
    assert code.returncode == 1 and doc["failed"], code.stderr[-3000:]
    root = doc["findings"][0]
    assert (root["process"], root["signature"], root["component"]) == (f"slurm-job-{job_id}", "slurm-node-fail",
                                                                       "Slurm"), json.dumps(doc["findings"], indent=1)
    assert "exclude" in root["fix"]
    evidence = " ".join([root["line"], *root["context"]])
    assert f"slurm job {job_id}: NODE_FAIL" in evidence, root  # Slurm's record (scontrol), beside its output's line
    # the steps' own lines (slurmstepd's, srun's) say the same: they follow the job's failure, none is a root
    rest = doc["findings"][1:]
    assert rest and {(f["signature"], f["follows"]) for f in rest} == {("slurm-node-fail", root["process"])}, rest
