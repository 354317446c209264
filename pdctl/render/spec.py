"""The deployment object: every process of a topology as data (argv, env, wrapper, executor, node, ports,
addresses), rendered once per launch before anything runs.

Rendering (pure) is separated from executing (side effects) so that `pdctl launch --dry-run`, the slurm
script and the real launch all start exactly the same commands, check-compat parses exactly those commands,
preflight probes the nodes with exactly their interpreters and model path, and tests check commands without
starting them.
"""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology
    from pdctl.topology.placement import ReplicaPlacement


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
    # seconds within which the health endpoint answers (200 or 503) while the HTTP server runs; None: at once
    # (pdctl.launch.health.PROBE_TIMEOUT_S). SGLang's /health runs a generate: pdctl.sglang.facts
    health_timeout_s: float | None = None
    bind_host: str | None = None  # where it binds its ports (port pre-check)
    ports: list[int] = field(default_factory=list)  # ports it binds on its node
    ssh: dict[str, Any] | None = None  # SSHConfig as a dict when the node is remote
    advertise: str | None = None  # the address it gives peers (URL host, bootstrap, KV transfer endpoints)
    # what runs the command on its node: `docker run ... IMAGE` (engine.container on local/ssh nodes) or an
    # `srun ...` step (Slurm, with pyxis and setup lines); empty = the command as it is
    wrap: list[str] = field(default_factory=list)
    # which executor starts and controls it (pdctl.executors): "local", "ssh" (a node with ssh:), "srun" (a
    # Slurm step started from here); set when the executor kind wraps the process (pdctl.render.kinds)
    executor: str = "local"
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
class Deployment:
    """All processes of a topology as they will run: workers (prefill first, then decode; or the colocated
    servers) and the router, with what the verdicts read besides the commands (placement, the model path and
    interpreters the processes are given, the KV transfer path's environment). Rendered once per launch
    (pdctl.render.deployment.render); check-compat and preflight read it and never render or place again."""

    topo: Topology  # the topology rendered (engine.version filled in when the nodes were asked)
    executor: str  # the executor kind that starts it (pdctl.render.kinds): local (and ssh: nodes) | slurm
    placements: list[ReplicaPlacement]
    workers: list[ProcessSpec]
    router: ProcessSpec
    model_path: str  # what --model-path says (absolute for a local directory)
    pythons: dict[str, str]  # node -> the interpreter its servers run with (preflight probes with it)
    transfer_env: dict[str, dict[str, str]]  # role -> the environment the KV transfer path adds
    nvlink: bool = False  # Mooncake over multi-node NVLink (transfer.nvlink, decided with preflight's facts)
    notes: list[str] = field(default_factory=list)

    @property
    def topology(self) -> str:
        """The topology's name (plan.json, state.json)."""
        return self.topo.name

    @property
    def engine(self) -> str:
        return self.topo.engine.kind

    @property
    def router_url(self) -> str:
        return self.router.url or ""

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
            "executor": self.executor,
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
