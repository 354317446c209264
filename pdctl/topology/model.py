"""The effective topology every part of pdctl reads: roles with server: defaults merged, router node resolved.

Two layers, because users write overrides but consumers want final values: `sections.TopologyFile` is the
file as written; `Topology` here is what launch, compat, eval and parity use. Cross-reference checks (node
names, dp | tp, port ranges) live in `loader.py`, which knows YAML positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pdctl.errors import UserError
from pdctl.topology.bench import BenchConfig
from pdctl.topology.cluster import ContainerConfig, SlurmConfig
from pdctl.topology.kubernetes import KubernetesConfig
from pdctl.topology.sections import (
    BLACKWELL_GPUS,
    SERVER_KEYS,
    ColocatedSpec,
    DecodeSpec,
    EngineConfig,
    EvalConfig,
    Gsm8kEval,
    Mode,
    ModelConfig,
    Node,
    ParityEval,
    PlacedSpec,
    PrefillSpec,
    RoleSpec,
    RouterConfig,
    ServerConfig,
    SSHConfig,
    TopologyFile,
    TransferConfig,
)

RoleName = Literal["prefill", "decode", "colocated"]

__all__ = [
    "BLACKWELL_GPUS", "ROUTER_METRICS_OFFSET", "SERVER_KEYS", "ColocatedSpec", "ContainerConfig", "DecodeSpec", "EngineConfig", "EvalConfig", "Gsm8kEval",
    "Mode", "ModelConfig", "Node", "ParityEval", "PlacedSpec", "PrefillSpec", "RoleConfig", "RoleName",
    "RoleSpec", "RouterConfig", "SSHConfig", "ServerConfig", "SlurmConfig", "Topology", "TopologyFile",
    "TransferConfig", "effective_role", "offset_port",
]

# router.metrics_port when not written: the port after router.port (see offset_port). Adjacent, so it stays
# out of the kernel's ephemeral range whenever the router's port does, and clear of SGLang's default ports.
ROUTER_METRICS_OFFSET = 1


def offset_port(port: int, offset: int) -> int:
    """A port derived from PORT (PORT + OFFSET, or PORT - OFFSET where that would pass 65535): the
    documented derivation of every port a topology does not write itself, so renders are deterministic."""
    return port + offset if port + offset <= 65535 else port - offset


class RoleConfig(BaseModel):
    """A role's EFFECTIVE settings: server: defaults merged with the role's overrides (role wins).

    `name` is "prefill" / "decode" in a PD topology and "colocated" for the plain servers of a colocated one
    (whose `radix_cache` is always false: that key is the PD decode flag, a colocated server has none).
    """

    model_config = ConfigDict(extra="forbid")

    name: RoleName
    nodes: list[str]
    replicas: int
    tp: int
    pp: int
    dp: int
    enable_dp_attention: bool
    port: int
    radix_cache: bool
    page_size: int
    kv_cache_dtype: str
    kv_layout: str
    hybrid_swa_memory: bool
    unified_memory: bool
    attention_backend: str | None
    chunked_prefill_size: int | None
    context_length: int | None
    max_total_tokens: int | None
    mem_fraction_static: float | None
    random_seed: int | None
    args: dict[str, Any]
    env: dict[str, str] = Field(default_factory=dict)  # the role's own (engine.env not included)

    @property
    def attn_tp(self) -> int:
        """Attention TP size: what decides KV head ownership (COMPAT.md)."""
        return self.tp // self.dp if self.enable_dp_attention else self.tp

    @property
    def gpus_per_replica(self) -> int:
        """GPUs (cpu: rank slots) one replica occupies."""
        return self.tp * self.pp


def effective_role(name: RoleName, spec: PlacedSpec, server: ServerConfig) -> RoleConfig:
    """Merge server: defaults with the keys the role actually wrote; `args` dicts merge, role wins."""
    values: dict[str, Any] = server.model_dump()
    for key in spec.model_fields_set:
        if key != "args":
            values[key] = getattr(spec, key)
    for key in type(spec).model_fields:
        if key not in SERVER_KEYS and key not in spec.model_fields_set:
            values[key] = getattr(spec, key)
    values.setdefault("radix_cache", False)  # colocated: no PD decode radix-cache flag
    values["args"] = {**server.args, **spec.args}
    return RoleConfig(name=name, **values)


class Topology(BaseModel):
    """A loaded topology: what launch, compat, eval and parity read. Build it with `load_topology`.

    `mode` says which roles exist: "pd" -> `prefill` and `decode` (both set, `colocated` None); "colocated"
    -> `colocated` only (`prefill`/`decode` None). Code that handles both modes iterates `roles()`; code that
    only makes sense for PD calls `require_pd()` first.
    """

    model_config = ConfigDict(extra="forbid")

    name: str
    mode: Mode = "pd"
    source_path: Path | None = None
    engine: EngineConfig
    model: ModelConfig
    nodes: list[Node]
    transfer: TransferConfig
    server: ServerConfig
    prefill: RoleConfig | None = None
    decode: RoleConfig | None = None
    colocated: RoleConfig | None = None
    router: RouterConfig
    eval: EvalConfig
    bench: BenchConfig = Field(default_factory=BenchConfig)
    slurm: SlurmConfig | None = None
    kubernetes: KubernetesConfig | None = None
    # `--set KEY=VALUE` given on the command line (pdctl.topology.overrides), and the document they produced:
    # what a launch keeps as the run's topology.yaml (the file alone would not say what ran)
    overrides: tuple[str, ...] = ()
    document: dict[str, Any] | None = Field(default=None, exclude=True, repr=False)
    # the cluster profile applied (pdctl.topology.profile.ProfileUse.to_json: file, what it filled in or
    # resolved) and the sweep variant this topology is ({"name", "overrides"}); None when there was none
    profile: dict[str, Any] | None = None
    variant: dict[str, Any] | None = None

    @classmethod
    def from_file_model(cls, raw: TopologyFile, source_path: Path | None = None, *,
                        overrides: tuple[str, ...] = (), document: dict[str, Any] | None = None,
                        profile: dict[str, Any] | None = None, variant: dict[str, Any] | None = None) -> Topology:
        """Effective view of a validated file (the loader has checked that the mode's sections are there):
        merged roles, router node default = first node of the first role."""
        roles: dict[str, RoleConfig | None] = {"prefill": None, "decode": None, "colocated": None}
        for role_name in ("prefill", "decode", "colocated"):
            spec = getattr(raw, role_name)
            if spec is not None:
                roles[role_name] = effective_role(role_name, spec, raw.server)
        first = roles["colocated"] if raw.mode == "colocated" else roles["prefill"]
        router = raw.router
        if router.node is None and first is not None:
            router = router.model_copy(update={"node": first.nodes[0]})
        if router.metrics_port is None:
            router = router.model_copy(update={"metrics_port": offset_port(router.port, ROUTER_METRICS_OFFSET)})
        return cls(
            name=raw.name,
            mode=raw.mode,
            source_path=source_path,
            engine=raw.engine,
            model=raw.model,
            nodes=raw.nodes,
            transfer=raw.transfer,
            server=raw.server,
            router=router,
            eval=raw.eval,
            bench=raw.bench,
            slurm=raw.slurm,
            kubernetes=raw.kubernetes,
            overrides=tuple(overrides),
            document=document,
            profile=profile,
            variant=variant,
            **roles,
        )

    @property
    def is_pd(self) -> bool:
        """True for a prefill/decode disaggregated topology."""
        return self.mode == "pd"

    def require_pd(self, what: str) -> tuple[RoleConfig, RoleConfig]:
        """(prefill, decode), or UserError (exit 2) "<what> needs a PD topology" for a colocated one.

        For commands that only mean something with a KV transfer (plan, transfer bench, ...).
        """
        if self.prefill is None or self.decode is None:
            where = f" ({self.source_path})" if self.source_path else ""
            raise UserError(f"{what} needs a PD topology (mode: pd, with prefill: and decode:); "
                            f"{self.name}{where} is mode: {self.mode}")
        return self.prefill, self.decode

    def node(self, name: str) -> Node:
        """The node called `name` (KeyError if absent: loading already checked every reference)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def roles(self) -> list[RoleConfig]:
        """The roles in placement / rendering order: [prefill, decode] (pd) or [colocated] (colocated)."""
        if self.mode == "colocated":
            return [self.colocated] if self.colocated is not None else []
        return [r for r in (self.prefill, self.decode) if r is not None]

    def role(self, name: str) -> RoleConfig:
        """A role by name ("prefill" | "decode" | "colocated"); KeyError if this topology has no such role."""
        if name in ("prefill", "decode", "colocated"):
            found = getattr(self, name)
            if found is not None:
                return found
        raise KeyError(name)

    def env_of(self, role: str) -> dict[str, str]:
        """The environment the topology gives ROLE's processes ("prefill" | "decode" | "colocated" | "router"):
        engine.env with the role's own env (prefill.env, ..., router.env) merged over it."""
        own = self.router.env if role == "router" else self.role(role).env
        return {**self.engine.env, **own}

    def role_nodes(self, role: str | RoleConfig) -> list[Node]:
        """The Node objects a role may use, in order (e.g. for GPU-kind rules like mxfp8 on SM100+)."""
        config = self.role(role) if isinstance(role, str) else role
        return [self.node(n) for n in config.nodes]

    @property
    def router_node(self) -> Node:
        """The node the router runs on (default: the first node of the first role)."""
        return self.node(self.router.node or self.roles()[0].nodes[0])
