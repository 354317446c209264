"""Executor kinds as rendering sees them: what starts each process of a deployment, chosen by name.

A kind is how a whole deployment is started: `local` (processes started from this machine, directly or over
ssh on nodes with `ssh:`, behind `docker run` when the engine has a container) or `slurm` (every process an
srun step inside an allocation, with pyxis for a container). Rendering asks the kind for each process's
wrapper and executor name; the executors that then start and control the processes are pdctl.executors,
keyed by those names. `kubernetes`: every process a container of a pod (pdctl.render.kubernetes renders the
manifests; pdctl.executors.kubernetes applies and controls them).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from pdctl.errors import UserError
from pdctl.render.container import container_name, docker_prefix
from pdctl.render.slurm import step_name, step_prefix
from pdctl.render.spec import ProcessSpec

if TYPE_CHECKING:
    from pdctl.topology import Topology

AUTO = "auto"


def wrap_local(topo: Topology, proc: ProcessSpec) -> ProcessSpec:
    """PROC started from this machine: over ssh when its node has `ssh:`, in `docker run` when the engine has
    a container, else as it is."""
    proc = replace(proc, executor="ssh" if proc.ssh is not None else "local")
    if topo.engine.container is None:
        return proc
    name = container_name(topo, proc.name)
    return replace(proc, wrap=docker_prefix(topo, topo.node(proc.node), name=name), container=name)


def wrap_slurm(topo: Topology, proc: ProcessSpec) -> ProcessSpec:
    """PROC as an srun step on its node (in the topology's container, after its setup lines)."""
    node = topo.node(proc.node)
    return replace(proc, wrap=step_prefix(topo, node, name=step_name(topo, proc.name), inside=True),
                   executor="srun")


def wrap_kubernetes(topo: Topology, proc: ProcessSpec) -> ProcessSpec:
    """PROC as a container of a pod: no wrapper (its pod template is the wrapper: pdctl.render.kubernetes
    renders the manifests from the whole deployment), controlled through the Kubernetes API."""
    return replace(proc, executor="kubernetes", ssh=None)


# kind -> how it starts one process; the first kind whose topology section is present wins `auto`
WRAPPERS: dict[str, Callable[[Topology, ProcessSpec], ProcessSpec]] = {
    "local": wrap_local, "slurm": wrap_slurm, "kubernetes": wrap_kubernetes}
# kind -> the topology section that makes `auto` choose it
SECTIONS: dict[str, str] = {"slurm": "slurm", "kubernetes": "kubernetes"}


def executor_kind(topo: Topology, requested: str = AUTO) -> str:
    """The kind that starts TOPO: REQUESTED, or for `auto` the kind whose section the topology has (slurm:),
    else local."""
    if requested == AUTO:
        return next((kind for kind, section in SECTIONS.items() if getattr(topo, section, None) is not None),
                    "local")
    if requested not in WRAPPERS:
        raise UserError(f"unknown executor {requested!r}: expected {AUTO} or one of {', '.join(WRAPPERS)}")
    return requested


def wrap(topo: Topology, proc: ProcessSpec, kind: str) -> ProcessSpec:
    """PROC as KIND starts it."""
    return WRAPPERS[kind](topo, proc)
