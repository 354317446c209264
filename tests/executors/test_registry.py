"""Executors are chosen by name: a process by its `executor` (the kind that wrapped it when it was rendered),
a node by its deployment's executor kind; an executor pdctl does not have is refused, never guessed."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import shutil

import pytest

from pdctl import executors
from pdctl.errors import UserError
from pdctl.executors import NODE_EXECUTORS, PROCESS_EXECUTORS, Executor, executor_for, node_executor
from pdctl.executors.kubernetes import KubernetesExecutor
from pdctl.executors.local import LocalExecutor
from pdctl.executors.slurm import SlurmExecutor, SrunExecutor
from pdctl.executors.ssh import SSHExecutor
from pdctl.render.deployment import render
from pdctl.render.kinds import (
    KINDS,
    PROCESS_KINDS,
    allocation_kind,
    executor_kind,
    process_kind,
    submit_refusal,
)
from pdctl.topology import load_topology
from tests.support.launch_samples import SGLANG_BASE, slurm_variant
from tests.support.paths import CONFIGS_DIR
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
    assert {p.executor for p in render(on_slurm, executor="kubernetes").processes()} == {"kubernetes"}
    assert isinstance(executor_for({"executor": "kubernetes"}), KubernetesExecutor)
    assert set(PROCESS_EXECUTORS) == {"local", "ssh", "srun", "slurm", "kubernetes"}


def test_the_kind_comes_from_the_topology_or_is_asked_for(tmp_path) -> None:
    plain, _ = make()
    assert executor_kind(plain) == "local" and executor_kind(plain, "slurm") == "slurm"
    config = tmp_path / "t.yaml"
    config.write_text(SGLANG_BASE)
    assert executor_kind(load_topology(slurm_variant(config, tmp_path))) == "slurm"  # a slurm: section
    assert executor_kind(load_topology(CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-k8s.yaml")) == "kubernetes"
    assert set(KINDS) == set(NODE_EXECUTORS) == {"local", "slurm", "kubernetes"}
    assert executor_kind(plain, "ssh") == "local"  # an alias is its kind (each node reached as its ssh: says)


def test_a_node_is_reached_the_way_its_kind_reaches_it() -> None:
    topo, _ = make(nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "gpu-07", "gpu": "h100", "gpus": 8, "ssh": {"user": "me"}}])
    assert isinstance(node_executor(topo.node("p0")), LocalExecutor)
    assert isinstance(node_executor(topo.node("d0")), SSHExecutor)
    if shutil.which("srun"):
        step = node_executor(topo.node("d0"), kind="slurm", topo=topo)
        assert isinstance(step, SlurmExecutor) and step.node == "gpu-07"
    with pytest.raises(UserError, match="runs no commands on cluster nodes"):  # a pod's node: the scheduler's
        node_executor(topo.node("d0"), kind="kubernetes", topo=topo).run(["true"], timeout=5)


@pytest.mark.parametrize("call", [
    lambda: executor_for({"name": "w", "executor": "nomad"}),
    lambda: node_executor(make()[0].node("p0"), kind="nomad"),
    lambda: executor_kind(make()[0], "nomad"),
])
def test_an_executor_pdctl_does_not_have_is_refused(call) -> None:
    with pytest.raises(UserError, match="nomad"):
        call()


def _members(protocol: type) -> dict[str, inspect.Signature | None]:
    """The protocol's members: its methods (with their signatures) and its attributes (None)."""
    methods = {name: inspect.signature(f) for name, f in vars(protocol).items()
               if callable(f) and not name.startswith("_")}
    return methods | {name: None for name in getattr(protocol, "__annotations__", {})}


def _executor_classes() -> dict[str, type]:
    """Every executor class of pdctl.executors (a class with a `kind`), by module and name."""
    out = {}
    for info in pkgutil.iter_modules(executors.__path__):
        module = importlib.import_module(f"{executors.__name__}.{info.name}")
        out |= {f"{module.__name__}.{name}": cls for name, cls in vars(module).items()
                if inspect.isclass(cls) and cls.__module__ == module.__name__
                and isinstance(getattr(cls, "kind", None), str) and callable(getattr(cls, "start", None))}
    return out


def _registered() -> list[tuple[str, object]]:
    """What every entry of the registries gives: an executor, or the UserError it refuses with."""
    topo, _ = make(nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "gpu-07", "gpu": "h100", "gpus": 8, "ssh": {"user": "me"}}])
    calls = [(f"process {name}", lambda f=factory, n=name: f({"name": "w", "executor": n, "host": "gpu-07",
                                                               "ssh": {"user": "me"}}))
             for name, factory in PROCESS_EXECUTORS.items()]
    calls += [(f"node {kind} {n.name}", lambda r=reach, n=n: r.executor(n, topo))
              for kind, reach in NODE_EXECUTORS.items() for n in topo.nodes]
    out: list[tuple[str, object]] = []
    for label, call in calls:
        try:
            out.append((label, call()))
        except UserError as exc:  # a slurm job's record without a node: refused, saying why
            out.append((label, exc))
    return out


def test_every_registered_kind_is_in_every_registry_and_implements_every_member() -> None:
    """A kind is one descriptor (pdctl.render.kinds.KINDS) whose processes each have an executor, and whose
    nodes are reached by an entry of NODE_EXECUTORS; every executor class has every member of the executor
    protocol, with its parameters, and every registry entry gives one of them (or refuses, saying why)."""
    assert set(NODE_EXECUTORS) == set(KINDS)
    assert set(PROCESS_EXECUTORS) == set(PROCESS_KINDS)
    members = _members(Executor)
    assert {"start", "stop", "read_log", "follow_log", "health", "unreachable", "run", "popen", "kind"} <= set(members)
    classes = _executor_classes()
    assert {c.kind for c in classes.values()} >= {"local", "ssh", "srun", "slurm", "kubernetes"}
    for label, cls in classes.items():
        for name, signature in members.items():
            assert hasattr(cls, name), f"{label}: no {name}"
            if signature is not None:
                own = inspect.signature(getattr(cls, name))
                assert list(own.parameters) == list(signature.parameters), f"{label}.{name}{own} != {signature}"
    given = _registered()
    assert all(isinstance(e, tuple(classes.values())) or isinstance(e, UserError) and e.message
               for _, e in given), given
    # only Slurm's refuse: a job's record names no node; without srun on PATH, its nodes cannot be reached
    assert all("slurm" in label for label, e in given if isinstance(e, UserError)), given


def test_a_kind_says_what_it_can_do_as_data() -> None:
    """The capabilities the shared code asks, with the refusal it gives, for each kind pdctl has."""
    assert submit_refusal() == ("--submit applies to Slurm: add a slurm: section to the topology, or "
                                "--executor slurm")
    assert [k for k in KINDS.values() if k.submits] == [KINDS["slurm"]]
    assert allocation_kind() == "slurm"
    assert [k.launch for k in KINDS.values()] == ["here", "job", "objects"]
    assert process_kind({"name": "old"}) is PROCESS_KINDS["local"]  # a record from before executors were named
    assert process_kind({"executor": "nomad"}).restart is None  # unknown: executor_for refuses it when asked
    assert [name for name, p in PROCESS_KINDS.items() if p.here] == ["local"]
    assert [name for name, p in PROCESS_KINDS.items() if not p.http_health] == ["kubernetes"]
    assert [name for name, p in PROCESS_KINDS.items() if p.restart] == ["srun"]
    assert PROCESS_KINDS["kubernetes"].started({"name": "pod"}) and not PROCESS_KINDS["local"].started({})
    assert PROCESS_KINDS["slurm"].started({"job_id": "7"}) and PROCESS_KINDS["ssh"].started({"pid": 42})
