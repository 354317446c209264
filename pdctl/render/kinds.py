"""Executor kinds as rendering and the shared launch code see them: one descriptor per kind (KINDS).

A kind is how a whole deployment is started: `local` (processes started from this machine, directly or over
ssh on nodes with `ssh:`, behind `docker run` when the engine has a container), `slurm` (every process an
srun step inside an allocation, with pyxis for a container; launched as a job) or `kubernetes` (every process
a container of a pod: pdctl.render.kubernetes renders the manifests; pdctl.executors.kubernetes applies and
controls them). Each kind's `Kind` says how it wraps a process, which topology section chooses it, what it can
do (submit, run inside an allocation, how it launches) and the `ProcessKind` of each process it records
(started here or not, health by HTTP, restartable or why not). The shared code reads these fields and never
compares a kind's name (tests/test_kind_seams.py); the executors that start and control the processes are
pdctl.executors, keyed by the same names.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pdctl.errors import UserError
from pdctl.render.container import container_name, docker_prefix
from pdctl.render.hosts import is_local_host
from pdctl.render.slurm import step_name, step_prefix
from pdctl.render.spec import ProcessSpec
from pdctl.sglang_stack.launcher import local_python

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology

AUTO = "auto"
DEFAULT = "local"  # the kind of a topology with no kind's section
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


def _is_this_machine(node: Node) -> bool:
    return node.ssh is None and node.host is not None and is_local_host(node.host)


# How a kind's deployment starts (Kind.launch): from this machine (pdctl starts and supervises each process),
# as a job the cluster runs (sbatch: pdctl inside the job starts the processes, HERE), or as objects a
# cluster's API is given (Kubernetes manifests applied; their readiness is the check).
HERE, JOB, OBJECTS = "here", "job", "objects"


@dataclass(frozen=True)
class ProcessKind:
    """How one kind of process (a ProcessSpec's and a state.json record's `executor`) behaves, as data: the
    shared code asks these, never the name. Its executor (start, stop, logs, ...) is in pdctl.executors,
    keyed by the same name."""

    name: str
    here: bool = False  # started as a child of this pdctl on this machine: its host and ports are this machine's
    http_health: bool = True  # its URL answers from here (a pod's URL is in-cluster: its readiness is its health)
    handleless: bool = False  # started once recorded, with no pid or job id (a pod: applied, not spawned)
    restart: str | None = None  # why `pdctl restart` refuses it; None: restartable

    def started(self, record: dict[str, Any]) -> bool:
        """Whether RECORD (of this kind) is of a process that was started: it has a pid, belongs to a
        submitted job, or is a kind that needs neither."""
        return record.get("pid") is not None or record.get("job_id") is not None or self.handleless


@dataclass(frozen=True)
class Kind:
    """One executor kind of a whole deployment, as rendering and the shared launch code see it. What
    controls its processes and reaches its nodes is pdctl.executors (PROCESS_EXECUTORS, NODE_EXECUTORS),
    keyed by the names here."""

    name: str
    wrap: Callable[[Topology, ProcessSpec], ProcessSpec]  # how it starts one process
    processes: tuple[ProcessKind, ...]  # the kinds of process it starts (and records)
    title: str = ""  # its name in messages
    section: str | None = None  # the topology section that makes `auto` choose it
    aliases: tuple[str, ...] = ()  # other names `--executor` takes for it
    # whether a node runs pdctl's own processes with the interpreter running pdctl here (None: never; they run
    # engine.python: a container image, a pod, another machine)
    runs_this_python: Callable[[Node], bool] | None = None
    launch: str = HERE  # HERE | JOB | OBJECTS
    submits: bool = False  # `--submit`: submitted to the cluster and followed
    in_allocation: bool = False  # `--in-allocation`: started inside an allocation it was given


def _always(_node: Node) -> bool:
    return True


_LOCAL = ProcessKind("local", here=True)
_SSH = ProcessKind("ssh")
_SRUN = ProcessKind("srun", restart="runs as a Slurm step: pdctl restarts local and ssh processes only; "
                                    "`pdctl down` and launch again")
_SLURM_JOB = ProcessKind("slurm")  # a submitted job's record
_POD = ProcessKind("kubernetes", http_health=False, handleless=True)

# The executor kinds, in `auto`'s order (the first whose topology section is present wins, else local). A new
# kind is one entry here (and its executors' entries in pdctl.executors).
KINDS: dict[str, Kind] = {k.name: k for k in (
    Kind("local", wrap_local, (_LOCAL, _SSH), title="local", aliases=("ssh",), runs_this_python=_is_this_machine),
    # every node of a Slurm job runs this very interpreter's pdctl there, from a shared filesystem
    Kind("slurm", wrap_slurm, (_SRUN, _SLURM_JOB), title="Slurm", section="slurm", runs_this_python=_always,
         launch=JOB, submits=True, in_allocation=True),
    Kind("kubernetes", wrap_kubernetes, (_POD,), title="Kubernetes", section="kubernetes", launch=OBJECTS),
)}
PROCESS_KINDS: dict[str, ProcessKind] = {p.name: p for k in KINDS.values() for p in k.processes}
_UNKNOWN = ProcessKind("unknown")  # a name no kind has: executor_for refuses it when asked to act


def process_kind(record: dict[str, Any] | ProcessSpec) -> ProcessKind:
    """The kind of a process (its ProcessSpec, its state.json record; a record without `executor` was
    started locally)."""
    name = record.executor if isinstance(record, ProcessSpec) else record.get("executor", "local")
    return PROCESS_KINDS.get(str(name), _UNKNOWN)


def kind_of_records(records: list[dict[str, Any]]) -> str:
    """The executor kind of a run from its state.json process records: the first non-default kind one of whose
    process kinds a record has (a Slurm step, a pod), else the default."""
    names = {process_kind(r).name for r in records}
    return next((k.name for k in KINDS.values() if k.name != DEFAULT and any(p.name in names for p in k.processes)),
                DEFAULT)


def kind_choices() -> list[str]:
    """Every name `--executor` takes for a kind (its aliases after it)."""
    return [name for k in KINDS.values() for name in (k.name, *k.aliases)]


def submit_refusal() -> str:
    """What `--submit` with a kind that does not submit is told."""
    kinds = [k for k in KINDS.values() if k.submits]
    return ("--submit applies to " + " or ".join(k.title for k in kinds) + ": add a "
            + " or ".join(f"{k.section}:" for k in kinds) + " section to the topology, or "
            + " or ".join(f"--executor {k.name}" for k in kinds))


def allocation_kind() -> str:
    """The kind `--in-allocation` starts (inside an allocation it was given)."""
    return next(k.name for k in KINDS.values() if k.in_allocation)


def own_python(topo: Topology, node: Node, kind: str) -> str:
    """The interpreter for pdctl's own Python processes on NODE (the reference engine, sglang_router) when KIND
    starts them.

    On this machine a bare `python`/`python3` would likely be a Python without pdctl and its router; the
    interpreter running pdctl certainly has them, so that one is used, as on the nodes of a Slurm job. Every
    other node (ssh, a host that is another machine, a container) gets engine.python, as its servers do: one
    node, one interpreter. An explicit engine.python (a path) is always kept."""
    if topo.engine.container is not None or topo.engine.python not in _DEFAULT_PYTHONS:
        return topo.engine.python
    runs_here = KINDS[kind].runs_this_python if kind in KINDS else None
    return sys.executable if runs_here is not None and runs_here(node) else topo.engine.python


def engine_python(topo: Topology, node: Node, kind: str) -> str:
    """The interpreter NODE's servers run with when KIND starts them: pdctl's own (own_python) for the reference
    engine, engine.python for SGLang, except on a CPU node where KIND runs this machine's interpreters and
    engine.python is left at its default: SGLang's side venv there (`make sglang-env`: $PDCTL_SGLANG_PYTHON,
    else ./.venv-sglang or the checkout's), which has the packages SGLang's server needs on CPU."""
    if topo.engine.kind == "reference":
        return own_python(topo, node, kind)
    runs_here = KINDS[kind].runs_this_python if kind in KINDS else None
    if (node.gpu == "cpu" and topo.engine.container is None and topo.engine.python in _DEFAULT_PYTHONS
            and runs_here is not None and runs_here(node)):
        return local_python()
    return topo.engine.python


def executor_kind(topo: Topology, requested: str = AUTO) -> str:
    """The kind that starts TOPO: REQUESTED, or for `auto` the kind whose section the topology has (slurm:),
    else local."""
    if requested == AUTO:
        return next((k.name for k in KINDS.values() if k.section and getattr(topo, k.section, None) is not None),
                    DEFAULT)
    named = next((k.name for k in KINDS.values() if requested in (k.name, *k.aliases)), None)
    if named is None:
        raise UserError(f"unknown executor {requested!r}: expected {AUTO} or one of {', '.join(KINDS)}")
    return named


def wrap(topo: Topology, proc: ProcessSpec, kind: str) -> ProcessSpec:
    """PROC as KIND starts it."""
    return KINDS[kind].wrap(topo, proc)
