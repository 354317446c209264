"""Executors are chosen by name: a process by its `executor` (the kind that wrapped it when it was rendered),
a node by its deployment's executor kind; an executor pdctl does not have is refused, never guessed."""

from __future__ import annotations

import shutil

import pytest

from pdctl.errors import UserError
from pdctl.executors import NODE_EXECUTORS, PROCESS_EXECUTORS, executor_for, node_executor
from pdctl.executors.local import LocalExecutor
from pdctl.executors.slurm import SlurmExecutor, SrunExecutor
from pdctl.executors.ssh import SSHExecutor
from pdctl.render.deployment import render
from pdctl.render.kinds import WRAPPERS, executor_kind
from pdctl.topology import load_topology
from tests.support.launch_samples import SGLANG_BASE, slurm_variant
from tests.support.topo_factory import make


def test_a_rendered_process_names_the_executor_that_controls_it(tmp_path) -> None:
    local, _ = make(nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8},
                           {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8,
                            "ssh": {"user": "me"}}], router={"node": "p0"})
    deployment = render(local)
    kinds = {p.name: p.executor for p in deployment.processes()}
    assert kinds == {"prefill-0": "local", "decode-0": "ssh", "router": "local"}
    assert isinstance(executor_for(deployment.workers[0]), LocalExecutor)
    remote = executor_for(deployment.workers[1])
    assert isinstance(remote, SSHExecutor) and remote.host == "10.0.0.12"
    on_slurm, _ = make(nodes=[{"name": "p0", "host": "gpu-01", "gpu": "h100", "gpus": 8},
                              {"name": "d0", "host": "gpu-02", "gpu": "h100", "gpus": 8}], router={"node": "p0"})
    assert {p.executor for p in render(on_slurm, executor="slurm").processes()} == {"srun"}
    assert isinstance(executor_for({"executor": "srun"}), SrunExecutor)
    assert isinstance(executor_for({"name": "old"}), LocalExecutor)  # a record written before executors were named
    assert set(PROCESS_EXECUTORS) == {"local", "ssh", "srun", "slurm"}


def test_the_kind_comes_from_the_topology_or_is_asked_for(tmp_path) -> None:
    plain, _ = make()
    assert executor_kind(plain) == "local" and executor_kind(plain, "slurm") == "slurm"
    config = tmp_path / "t.yaml"
    config.write_text(SGLANG_BASE)
    assert executor_kind(load_topology(slurm_variant(config, tmp_path))) == "slurm"  # a slurm: section
    assert set(WRAPPERS) == set(NODE_EXECUTORS) == {"local", "slurm"}


def test_a_node_is_reached_the_way_its_kind_reaches_it() -> None:
    topo, _ = make(nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "gpu-07", "gpu": "h100", "gpus": 8, "ssh": {"user": "me"}}])
    assert isinstance(node_executor(topo.node("p0")), LocalExecutor)
    assert isinstance(node_executor(topo.node("d0")), SSHExecutor)
    if shutil.which("srun"):
        step = node_executor(topo.node("d0"), kind="slurm", topo=topo)
        assert isinstance(step, SlurmExecutor) and step.node == "gpu-07"


@pytest.mark.parametrize("call", [
    lambda: executor_for({"name": "w", "executor": "kubernetes"}),
    lambda: node_executor(make()[0].node("p0"), kind="kubernetes"),
    lambda: executor_kind(make()[0], "kubernetes"),
])
def test_an_executor_pdctl_does_not_have_is_refused(call) -> None:
    with pytest.raises(UserError, match="kubernetes"):
        call()
