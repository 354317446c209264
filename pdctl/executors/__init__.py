"""Executors: how a rendered process is started, checked, signalled and read, on some node.

One small protocol (`Executor`, pdctl.executors.base) with one module per kind: `local` (subprocesses in
their own process groups), `ssh` (the system ssh client), `slurm` (srun: short commands on a Slurm node, and
processes started as srun steps), `kubernetes` (containers of pods, through the Kubernetes API). Two
registries choose them by name: PROCESS_EXECUTORS by a process's `executor` (its ProcessSpec, its state.json
record; pdctl.render.kinds.PROCESS_KINDS holds the same names' data), NODE_EXECUTORS by a deployment's
executor kind (pdctl.render.kinds.KINDS): how a short command reaches one of its nodes, which nodes can be
asked before a launch, how preflight binds its nodes, how a launch enters an allocation it was given. Shared
code asks these; it never tests a kind's name (tests/test_kind_seams.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl.errors import UserError
from pdctl.executors.base import CommandResult, Executor, Wrap, wrapped
from pdctl.executors.kubernetes import KubernetesExecutor
from pdctl.executors.local import LocalExecutor
from pdctl.executors.slurm import SlurmExecutor, SrunExecutor, node_step
from pdctl.executors.slurm_allocation import enter_allocation, slurm_nodes
from pdctl.executors.slurm_job import SlurmJobExecutor, job_records
from pdctl.executors.ssh import SSHExecutor, shared_connections
from pdctl.render.container import docker_prefix
from pdctl.render.hosts import is_local_host
from pdctl.render.spec import ProcessSpec

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology


def _local(record: dict[str, Any] | ProcessSpec) -> Executor:
    return LocalExecutor()


def _ssh(record: dict[str, Any] | ProcessSpec) -> Executor:
    if isinstance(record, ProcessSpec):
        return SSHExecutor(record.host, record.ssh or {})
    return SSHExecutor(record["host"], record.get("ssh") or {})


def _srun(record: dict[str, Any] | ProcessSpec) -> Executor:
    return SrunExecutor()


def _slurm_job(record: dict[str, Any] | ProcessSpec) -> Executor:
    return SlurmJobExecutor()


def _kubernetes(record: dict[str, Any] | ProcessSpec) -> Executor:
    return KubernetesExecutor()


# A process's `executor` (its ProcessSpec, its state.json record) -> what controls it. One entry per kind of
# process pdctl starts: a new executor is one module and one entry here.
PROCESS_EXECUTORS: dict[str, Callable[[dict[str, Any] | ProcessSpec], Executor]] = {
    "local": _local,
    "ssh": _ssh,
    "srun": _srun,  # a Slurm step started from the launching machine
    "slurm": _slurm_job,  # a run's job itself (pdctl.executors.slurm_job: diagnose reads it)
    "kubernetes": _kubernetes,  # a container of a pod (pdctl.launch.kube applied its objects)
}


def executor_for(record: dict[str, Any] | ProcessSpec) -> Executor:
    """The executor of a process, by its `executor` (a record without one was started locally)."""
    kind = record.executor if isinstance(record, ProcessSpec) else record.get("executor", "local")
    factory = PROCESS_EXECUTORS.get(str(kind))
    if factory is None:
        name = record.name if isinstance(record, ProcessSpec) else record.get("name")
        raise UserError(f"process {name!r} has executor {kind!r}, which pdctl cannot control here")
    return factory(record)


def _direct(node: Node, topo: Topology | None) -> Executor:
    """A node reached from this machine: ssh when it has `ssh:`, else this machine; in the engine's
    container (docker) when TOPO has one."""
    wrap: Wrap | None = None
    if topo is not None and topo.engine.container is not None:

        def wrap(interactive: bool) -> list[str]:
            return docker_prefix(topo, node, interactive=interactive)

    if node.ssh is not None:
        return SSHExecutor(node.target, node.ssh.model_dump(), wrap=wrap)
    return LocalExecutor(wrap=wrap)


def _slurm_node(node: Node, topo: Topology | None) -> Executor:
    """An srun step on the Slurm node named by NODE's host."""
    return SlurmExecutor(node=node.target, wrap=node_step(topo, node))


def _cluster_node(node: Node, topo: Topology | None) -> Executor:
    """A node of a Kubernetes deployment: the scheduler's choice, reached by no command (its executor's run
    and popen refuse, saying so: preflight and the version question need another kind)."""
    return KubernetesExecutor()


def _reached_from_here(node: Node) -> bool:
    """A node a command reaches from here: over ssh, or this machine."""
    return node.ssh is not None or (node.host is not None and is_local_host(node.host))


def _assigned(node: Node) -> bool:
    """A Slurm node srun reaches: one that names its host (a node without one exists only in a job)."""
    return not node.allocated


def _as_written(topo: Topology) -> Topology:
    return topo


def _no_records(state: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    return []


@dataclass(frozen=True)
class NodeKind:
    """How a deployment's executor kind reaches its nodes."""

    executor: Callable[[Node, Topology | None], Executor]  # a short command on one node
    askable: Callable[[Node], bool]  # whether the version question can run there before a launch
    bind: Callable[[Topology], Topology] = _as_written  # preflight: the nodes as this kind reaches them
    # `--in-allocation`: (topo bound to the allocation it runs in, the state document's fields); None: no allocation
    allocation: Callable[..., tuple[Topology, dict[str, Any]]] | None = None
    # records of what the kind itself ran for a run beside its processes (state.json, run dir) -> records that
    # executor_for controls: a Slurm run's job (its output, Slurm's record of its end), which diagnose reads
    own_records: Callable[[dict[str, Any], Path], list[dict[str, Any]]] = _no_records


# Executor kind of a deployment (pdctl.render.kinds.KINDS) -> how it reaches its nodes.
NODE_EXECUTORS: dict[str, NodeKind] = {
    "local": NodeKind(_direct, _reached_from_here),
    # Slurm nodes are bound to the allocation preflight runs in (or must name their hosts)
    "slurm": NodeKind(_slurm_node, _assigned, bind=slurm_nodes, allocation=enter_allocation, own_records=job_records),
    # a launch asks no pod's node (it applies objects); asked anyway, a node is reached as `local` would
    "kubernetes": NodeKind(_cluster_node, _reached_from_here),
}


def node_kind(kind: str) -> NodeKind:
    """How executor KIND reaches its nodes (UserError for a kind pdctl does not have)."""
    found = NODE_EXECUTORS.get(kind)
    if found is None:
        raise UserError(f"unknown executor {kind!r}: expected one of {', '.join(NODE_EXECUTORS)}")
    return found


def run_records(state: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    """What the run's kind ran for it besides its processes (NodeKind.own_records; [] for a kind it does not
    name or that runs nothing of its own)."""
    found = NODE_EXECUTORS.get(str(state.get("executor")))
    return found.own_records(state, run_dir) if found is not None else []


def node_executor(node: Node, *, kind: str = "local", topo: Topology | None = None) -> Executor:
    """The executor for a topology node under executor KIND (local: ssh when the node has `ssh:`, else this
    machine; slurm: an srun step on the Slurm node named by its host). With TOPO, commands run the way its
    engine runs: in engine.container (docker on local/ssh nodes, pyxis under Slurm) and after slurm.setup —
    so preflight's probes and the version question see what the servers will see."""
    return node_kind(kind).executor(node, topo)


__all__ = ["NODE_EXECUTORS", "PROCESS_EXECUTORS", "CommandResult", "Executor", "NodeKind", "Wrap", "executor_for",
           "node_executor", "node_kind", "run_records", "shared_connections", "wrapped"]
