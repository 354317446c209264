"""The launch plan: every process of a deployment as data (argv + env per node), before anything runs.

Rendering (pure) is separated from executing (side effects) so that `pdctl launch --dry-run`, the slurm
script and the real launch all start exactly the same commands, and tests can check commands without
starting them.
"""

from __future__ import annotations

import shlex
import sys
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology

_DEFAULT_PYTHONS = {"python", "python3"}


@dataclass(frozen=True)
class ProcessSpec:
    """One process on one node: a role replica's node rank, or the router.

    `url` is set on the process that serves HTTP (node rank 0 of a replica, the router); other node ranks of
    a multi-node replica have none and are healthy while alive.
    """

    name: str  # "prefill-0", "decode-1", "prefill-0-n1" (node rank 1), "router"
    role: str  # "prefill" | "decode" | "colocated" | "router"
    replica: int
    node: str
    host: str  # the node's `host`: where pdctl reaches it (ssh target, Slurm node name)
    node_rank: int
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    url: str | None = None  # http://host:port for clients (None on node ranks > 0)
    health_path: str | None = None  # "/health" for workers, "/readiness" for the router
    bind_host: str | None = None  # where it binds its ports (port pre-check)
    ports: list[int] = field(default_factory=list)  # ports it binds on its node
    ssh: dict[str, Any] | None = None  # SSHConfig as a dict when the node is remote
    advertise: str | None = None  # the address it gives peers (URL host, bootstrap, KV transfer endpoints)
    # what runs the command on its node: `docker run ... IMAGE` (engine.container on local/ssh nodes) or an
    # `srun ...` step (Slurm, with pyxis and setup lines); empty = the command as it is
    wrap: list[str] = field(default_factory=list)
    executor: str | None = None  # "srun": a Slurm step started from here; None: ssh if `ssh`, else local
    container: str | None = None  # the docker container's name (removed by `pdctl down` if it outlives docker)
    metrics_url: str | None = None  # Prometheus endpoint (the router's)

    @property
    def launch_argv(self) -> list[str]:
        """What the executor runs: the wrapper, then `env K=V ...` and the command (env inside the wrapper, so
        that it reaches the process in a container or on a Slurm node)."""
        env = [f"{k}={v}" for k, v in self.env.items()]
        return [*self.wrap, *(["env", *env] if env else []), *self.argv]

    @property
    def command(self) -> str:
        """A copy-pasteable shell line: `[wrapper] env K=V ... argv` (every value shell-quoted)."""
        return shlex.join(self.launch_argv)

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["command"] = self.command
        return doc


@dataclass(frozen=True)
class LaunchPlan:
    """All processes of a deployment: workers (prefill first, then decode; or the colocated servers) and the
    router."""

    topology: str
    engine: str
    workers: list[ProcessSpec]
    router: ProcessSpec
    router_url: str
    notes: list[str] = field(default_factory=list)

    def processes(self) -> list[ProcessSpec]:
        """Workers then the router: the start order."""
        return [*self.workers, self.router]

    def by_node(self) -> dict[str, list[ProcessSpec]]:
        """Processes grouped per node, in start order (what --dry-run prints)."""
        out: dict[str, list[ProcessSpec]] = {}
        for proc in self.processes():
            out.setdefault(proc.node, []).append(proc)
        return out

    def to_json(self) -> dict[str, Any]:
        """The plan.json document."""
        return {
            "topology": self.topology,
            "engine": self.engine,
            "router_url": self.router_url,
            "nodes": {node: [p.name for p in procs] for node, procs in self.by_node().items()},
            "processes": [p.to_json() for p in self.workers],
            "router": self.router.to_json(),
            "router_metrics_url": self.router.metrics_url,
            "notes": list(self.notes),
        }


def process_name(role: str, replica: int, node_rank: int = 0) -> str:
    """'prefill-0', or 'prefill-0-n1' for node rank 1 of a multi-node replica (also the log file stem)."""
    return f"{role}-{replica}" + (f"-n{node_rank}" if node_rank else "")


def node_python(topo: Topology, node: Node, *, slurm: bool = False) -> str:
    """The interpreter for pdctl's own Python processes on NODE (the reference engine, sglang_router).

    On this machine a bare `python`/`python3` would likely be a Python without pdctl and its router; the
    interpreter running pdctl certainly has them, so that one is used. So it is on the nodes of a Slurm job
    (SLURM, no container): the job runs this very interpreter's pdctl there, from a shared filesystem. Every
    other node (ssh, a host that is another machine, a container) gets engine.python, as its servers do: one
    node, one interpreter."""
    if topo.engine.container is not None or topo.engine.python not in _DEFAULT_PYTHONS:
        return topo.engine.python
    if slurm:
        return sys.executable
    if node.ssh is None and node.host is not None:
        from pdctl.launch.hosts import is_local_host

        if is_local_host(node.host):
            return sys.executable
    return topo.engine.python


def node_ssh(node: Node) -> dict[str, Any] | None:
    """NODE's `ssh:` settings as the plain dict a ProcessSpec (and state.json) carries; None = local."""
    return node.ssh.model_dump() if node.ssh is not None else None


def optional_flag(flag: str, value: object) -> list[str]:
    """[FLAG, VALUE], or nothing when VALUE is None (a setting left to the engine's default)."""
    return [] if value is None else [flag, str(value)]


def flag_args(args: dict[str, Any]) -> list[str]:
    """Pass-through flags (`args:` of the topology) as argv: true = bare flag, false/null = omitted,
    a list = the flag followed by each value (SGLang's nargs='+' flags)."""
    out: list[str] = []
    for name, value in args.items():
        flag = "--" + str(name).lstrip("-")
        if value is None or value is False:
            continue
        if value is True:
            out.append(flag)
        elif isinstance(value, (list, tuple)):
            out.append(flag)
            out.extend(_text(v) for v in value)
        else:
            out += [flag, _text(value)]
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def merge_flags(base: list[str], passthrough: dict[str, Any]) -> list[str]:
    """BASE argv with the pass-through flags appended; a pass-through flag that pdctl already renders
    replaces pdctl's value (the user's explicit `args:` win), instead of giving SGLang the flag twice."""
    override = {"--" + str(k).lstrip("-") for k in passthrough}
    out: list[str] = []
    skipping = False
    for item in base:
        if item.startswith("--"):
            skipping = item in override
        if not skipping:
            out.append(item)
    return out + flag_args(passthrough)
