"""Topology files: YAML -> typed model with line/col errors, placement, JSON schema (TOPOLOGY.md).

Import is light (pydantic + yaml): check-compat and `pdctl --help` paths import this package.
"""

from __future__ import annotations

from pdctl.topology.loader import build_topology, load_topology, load_topology_text
from pdctl.topology.model import (
    EngineConfig,
    ModelConfig,
    Node,
    RoleConfig,
    RouterConfig,
    ServerConfig,
    SSHConfig,
    Topology,
    TopologyFile,
    TransferConfig,
)

__all__ = [
    "EngineConfig", "ModelConfig", "Node", "RoleConfig", "RouterConfig", "SSHConfig", "ServerConfig",
    "Topology", "TopologyFile", "TransferConfig", "build_topology", "load_topology", "load_topology_text",
]
