"""Executor kinds as rendering sees them: what starts each process of a deployment, chosen by name.

A kind is how a whole deployment is started: `local` (processes started from this machine, directly or over
ssh on nodes with `ssh:`, behind `docker run` when the engine has a container) or `slurm` (every process an
srun step inside an allocation, with pyxis for a container). Rendering asks the kind for each process's
wrapper and executor name; the executors that then start and control the processes are pdctl.executors,
keyed by those names. `kubernetes`: every process a container of a pod (pdctl.render.kubernetes renders the
manifests; pdctl.executors.kubernetes applies and controls them).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from pdctl.errors import UserError
from pdctl.render.container import container_name, docker_prefix
from pdctl.render.hosts import is_local_host
from pdctl.render.slurm import step_name, step_prefix
from pdctl.render.spec import ProcessSpec
from pdctl.sglang_stack.launcher import local_python

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology

AUTO = "auto"
_DEFAULT_PYTHONS = {"python", "python3"}


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


def _is_this_machine(node: Node) -> bool:
    return node.ssh is None and node.host is not None and is_local_host(node.host)


# kind -> whether a node of it runs pdctl's own processes with the interpreter running pdctl here: a local node
# that is this machine; every node of a Slurm job (the job runs this very interpreter's pdctl there, from a
# shared filesystem). A kind not listed runs engine.python (a container image, a pod, another machine).
RUNS_THIS_PYTHON: dict[str, Callable[[Node], bool]] = {"local": _is_this_machine, "slurm": lambda _node: True}


def own_python(topo: Topology, node: Node, kind: str) -> str:
    """The interpreter for pdctl's own Python processes on NODE (the reference engine, sglang_router) when KIND
    starts them.

    On this machine a bare `python`/`python3` would likely be a Python without pdctl and its router; the
    interpreter running pdctl certainly has them, so that one is used, as on the nodes of a Slurm job. Every
    other node (ssh, a host that is another machine, a container) gets engine.python, as its servers do: one
    node, one interpreter. An explicit engine.python (a path) is always kept."""
    if topo.engine.container is not None or topo.engine.python not in _DEFAULT_PYTHONS:
        return topo.engine.python
    runs_here = RUNS_THIS_PYTHON.get(kind)
    return sys.executable if runs_here is not None and runs_here(node) else topo.engine.python


def engine_python(topo: Topology, node: Node, kind: str) -> str:
    """The interpreter NODE's servers run with when KIND starts them: pdctl's own (own_python) for the reference
    engine, engine.python for SGLang, except on a CPU node where KIND runs this machine's interpreters and
    engine.python is left at its default: SGLang's side venv there (`make sglang-env`: $PDCTL_SGLANG_PYTHON,
    else ./.venv-sglang or the checkout's), which has the packages SGLang's server needs on CPU."""
    if topo.engine.kind == "reference":
        return own_python(topo, node, kind)
    runs_here = RUNS_THIS_PYTHON.get(kind)
    if (node.gpu == "cpu" and topo.engine.container is None and topo.engine.python in _DEFAULT_PYTHONS
            and runs_here is not None and runs_here(node)):
        return local_python()
    return topo.engine.python


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
