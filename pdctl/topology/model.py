"""The effective topology every part of pdctl reads: roles with server: defaults merged, router node resolved.

Two layers, because users write overrides but consumers want final values: `sections.TopologyFile` is the
file as written; `Topology` here is what launch, compat, eval and parity use. Cross-reference checks (node
names, dp | tp, port ranges) live in `loader.py`, which knows YAML positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from pdctl.topology.sections import (
    BLACKWELL_GPUS,
    SERVER_KEYS,
    DecodeSpec,
    EngineConfig,
    EvalConfig,
    Gsm8kEval,
    ModelConfig,
    Node,
    ParityEval,
    PrefillSpec,
    RoleSpec,
    RouterConfig,
    ServerConfig,
    SSHConfig,
    TopologyFile,
    TransferConfig,
)

__all__ = [
    "BLACKWELL_GPUS", "SERVER_KEYS", "DecodeSpec", "EngineConfig", "EvalConfig", "Gsm8kEval", "ModelConfig",
    "Node", "ParityEval", "PrefillSpec", "RoleConfig", "RoleSpec", "RouterConfig", "SSHConfig",
    "ServerConfig",
    "Topology", "TopologyFile", "TransferConfig", "effective_role",
]

class RoleConfig(BaseModel):
    """A role's EFFECTIVE settings: server: defaults merged with the role's overrides (role wins)."""

    model_config = ConfigDict(extra="forbid")

    name: Literal["prefill", "decode"]
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

    @property
    def attn_tp(self) -> int:
        """Attention TP size: what decides KV head ownership (COMPAT.md)."""
        return self.tp // self.dp if self.enable_dp_attention else self.tp

    @property
    def gpus_per_replica(self) -> int:
        """GPUs (cpu: rank slots) one replica occupies."""
        return self.tp * self.pp


def effective_role(name: Literal["prefill", "decode"], spec: RoleSpec, server: ServerConfig) -> RoleConfig:
    """Merge server: defaults with the keys the role actually wrote; `args` dicts merge, role wins."""
    values: dict[str, Any] = server.model_dump()
    for key in spec.model_fields_set:
        if key != "args":
            values[key] = getattr(spec, key)
    for key in RoleSpec.model_fields:
        if key not in SERVER_KEYS and key not in spec.model_fields_set:
            values[key] = getattr(spec, key)
    values["args"] = {**server.args, **spec.args}
    return RoleConfig(name=name, **values)


class Topology(BaseModel):
    """A loaded topology: what launch, compat, eval and parity read. Build it with `load_topology`."""

    model_config = ConfigDict(extra="forbid")

    name: str
    source_path: Path | None = None
    engine: EngineConfig
    model: ModelConfig
    nodes: list[Node]
    transfer: TransferConfig
    server: ServerConfig
    prefill: RoleConfig
    decode: RoleConfig
    router: RouterConfig
    eval: EvalConfig

    @classmethod
    def from_file_model(cls, raw: TopologyFile, source_path: Path | None = None) -> Topology:
        """Effective view of a validated file: merged roles, router node default = first prefill node."""
        router = raw.router
        if router.node is None:
            router = router.model_copy(update={"node": raw.prefill.nodes[0]})
        return cls(
            name=raw.name,
            source_path=source_path,
            engine=raw.engine,
            model=raw.model,
            nodes=raw.nodes,
            transfer=raw.transfer,
            server=raw.server,
            prefill=effective_role("prefill", raw.prefill, raw.server),
            decode=effective_role("decode", raw.decode, raw.server),
            router=router,
            eval=raw.eval,
        )

    def node(self, name: str) -> Node:
        """The node called `name` (KeyError if absent: loading already checked every reference)."""
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def roles(self) -> list[RoleConfig]:
        """[prefill, decode], the order placement and rendering use."""
        return [self.prefill, self.decode]

    def role(self, name: str) -> RoleConfig:
        """A role by name ("prefill" | "decode")."""
        if name == "prefill":
            return self.prefill
        if name == "decode":
            return self.decode
        raise KeyError(name)

    def role_nodes(self, role: str | RoleConfig) -> list[Node]:
        """The Node objects a role may use, in order (e.g. for GPU-kind rules like mxfp8 on SM100+)."""
        config = self.role(role) if isinstance(role, str) else role
        return [self.node(n) for n in config.nodes]

    @property
    def router_node(self) -> Node:
        """The node the router runs on."""
        return self.node(self.router.node or self.prefill.nodes[0])
