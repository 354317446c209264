"""The srun step every process and probe on a Slurm node runs behind, word by word; its setup script run for
real by bash; the job's resource options."""

from __future__ import annotations

import subprocess

import pytest
import yaml

from pdctl.errors import UserError
from pdctl.render.deployment import render
from pdctl.render.slurm import STEP_SCRIPT_NAME, gpu_option, job_options, step_prefix
from pdctl.topology import load_topology_text
from tests.support.launch_samples import SGLANG_BASE, sglang_on_slurm

SLURM = {"partition": "gpu", "account": "llm", "qos": "high", "time_limit": "02:00:00", "reservation": "pd",
         "constraint": "h100&ib", "srun_options": {"cpu-bind": "none", "mpi": "pmix"},
         "setup": ["module load cuda/12.8", "source /opt/venv/bin/activate"]}


def topology(slurm: dict | None = None, container: dict | None = None, **over: object):
    if container:
        engine = {**yaml.safe_load(SGLANG_BASE)["engine"], "container": container}
        over = {"engine": engine, **over}
    return sglang_on_slurm([None, None, None], SLURM if slurm is None else slurm, **over)


def test_a_step_inside_the_allocation_word_by_word() -> None:
    topo = topology(container={"image": "nvcr.io/nvidia/sglang:25.10-py3", "env": {"NCCL_DEBUG": "INFO"}})
    argv = step_prefix(topo, topo.node("p0"), name="pdctl-variant-prefill-0", inside=True)
    assert argv == [
        "srun", "--nodes=1", "--ntasks=1", "--nodelist=<p0>", "--job-name=pdctl-variant-prefill-0", "--quiet",
        "--overlap",
        "--cpu-bind=none", "--mpi=pmix",
        "--container-image=nvcr.io#nvidia/sglang:25.10-py3",
        "--container-name=pdctl-variant",  # one container per node, imported once, reused by every step
        "--no-container-entrypoint", "--no-container-mount-home",
        "env", "NCCL_DEBUG=INFO",
        "bash", "-c", 'set -e\nmodule load cuda/12.8\nsource /opt/venv/bin/activate\nexec "$@"', STEP_SCRIPT_NAME,
    ]


def test_a_step_outside_any_allocation_asks_for_the_job_resources_but_not_whole_nodes() -> None:
    topo = topology({"partition": "gpu", "gres": "gpu:8", "time_limit": 30})
    argv = step_prefix(topo, topo.node("d0"), name="pdctl-run", inside=False)
    assert argv == ["srun", "--nodes=1", "--ntasks=1", "--nodelist=<d0>", "--job-name=pdctl-run", "--quiet",
                    "--partition=gpu", "--time=30", "--gres=gpu:8"]


def test_job_options_and_the_gpu_request() -> None:
    assert job_options(topology()) == ["--partition=gpu", "--account=llm", "--qos=high", "--time=02:00:00",
                                       "--reservation=pd", "--constraint=h100&ib", "--gpus-per-node=8",
                                       "--exclusive"]
    assert gpu_option(topology({"gres": "gpu:h100:4"})) == "--gres=gpu:h100:4"
    assert gpu_option(topology({"gpus_per_node": 4})) == "--gpus-per-node=4"
    assert gpu_option(topology({"gpus_per_node": 0})) is None  # 0: no GPU directive
    doc = yaml.safe_load(SGLANG_BASE)
    mixed = [{**n, "gpus": 4 + i} for i, n in enumerate(doc["nodes"])]
    assert gpu_option(topology({}, nodes=mixed)) is None  # no one count fits every node: not guessed
    cpu = [{**n, "gpu": "cpu"} for n in doc["nodes"]]
    assert gpu_option(topology({}, nodes=cpu)) is None
    assert "--exclusive" not in job_options(topology({"exclusive": False}))


def test_the_setup_script_runs_its_lines_then_the_command_with_its_env() -> None:
    topo = topology({"setup": ["export FROM_SETUP=yes", 'cd "$TMPDIR"']})
    prefix = step_prefix(topo, topo.node("p0"), name="x", inside=True)
    tail = prefix[prefix.index("bash"):]  # what srun runs on the node
    done = subprocess.run([*tail, "env", "FROM_ENV=1", "sh", "-c", 'echo "$0 $FROM_SETUP $FROM_ENV $(pwd)"', "cmd"],
                          capture_output=True, text=True, timeout=30, env={"TMPDIR": "/tmp", "PATH": "/usr/bin:/bin"},
                          check=False)
    assert done.returncode == 0 and done.stdout.split() == ["cmd", "yes", "1", "/tmp"], done.stderr
    failing = step_prefix(topology({"setup": ["false", "echo never"]}), topo.node("p0"), name="x", inside=True)
    tail = failing[failing.index("bash"):]
    done = subprocess.run([*tail, "echo", "ran"], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 1 and "ran" not in done.stdout  # a failing setup line stops the step


def test_every_process_of_a_slurm_plan_is_a_step_on_its_node() -> None:
    topo = topology()
    plan = render(topo, executor="slurm")
    for proc in plan.processes():
        assert proc.executor == "srun" and proc.wrap[0] == "srun"
        assert f"--nodelist=<{proc.node}>" in proc.wrap and f"--job-name=pdctl-variant-{proc.name}" in proc.wrap
        assert "--overlap" in proc.wrap
        assert proc.launch_argv[len(proc.wrap):] == (["env", *(f"{k}={v}" for k, v in proc.env.items())]
                                                     if proc.env else []) + proc.argv


def test_a_node_host_written_as_an_address_is_refused_for_slurm() -> None:
    topo = load_topology_text(SGLANG_BASE)  # hosts 10.0.0.11...
    with pytest.raises(UserError, match="is an address, but Slurm places steps on node names"):
        step_prefix(topo, topo.node("p0"), name="x")
