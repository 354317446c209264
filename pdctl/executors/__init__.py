"""Executors: how a rendered process is started, checked, signalled and read, on some node.

One small protocol (`Executor`, pdctl.executors.base) with one module per kind: `local` (subprocesses in
their own process groups), `ssh` (the system ssh client), `slurm` (srun: short commands on a Slurm node, and
processes started as srun steps). Two registries choose them by name: PROCESS_EXECUTORS by a process's
`executor` (its ProcessSpec, its state.json record), NODE_EXECUTORS by a deployment's executor kind
(pdctl.render.kinds).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pdctl.errors import UserError
from pdctl.executors.base import CommandResult, Executor, Wrap, wrapped
from pdctl.executors.local import LocalExecutor
from pdctl.executors.slurm import SlurmExecutor, SrunExecutor, node_step
from pdctl.executors.ssh import SSHExecutor
from pdctl.render.container import docker_prefix
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
    return SlurmExecutor()


# A process's `executor` (its ProcessSpec, its state.json record) -> what controls it. One entry per kind of
# process pdctl starts: a new executor is one module and one entry here.
PROCESS_EXECUTORS: dict[str, Callable[[dict[str, Any] | ProcessSpec], Executor]] = {
    "local": _local,
    "ssh": _ssh,
    "srun": _srun,  # a Slurm step started from the launching machine
    "slurm": _slurm_job,  # a submitted job's record
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


# Executor kind of a deployment (pdctl.render.kinds) -> how a short command reaches one of its nodes.
NODE_EXECUTORS: dict[str, Callable[[Node, Topology | None], Executor]] = {"local": _direct, "slurm": _slurm_node}


def node_executor(node: Node, *, kind: str = "local", topo: Topology | None = None) -> Executor:
    """The executor for a topology node under executor KIND (local: ssh when the node has `ssh:`, else this
    machine; slurm: an srun step on the Slurm node named by its host). With TOPO, commands run the way its
    engine runs: in engine.container (docker on local/ssh nodes, pyxis under Slurm) and after slurm.setup —
    so preflight's probes and the version question see what the servers will see."""
    factory = NODE_EXECUTORS.get(kind)
    if factory is None:
        raise UserError(f"unknown executor {kind!r}: expected one of {', '.join(NODE_EXECUTORS)}")
    return factory(node, topo)


__all__ = ["NODE_EXECUTORS", "PROCESS_EXECUTORS", "CommandResult", "Executor", "Wrap", "executor_for", "node_executor",
           "wrapped"]
