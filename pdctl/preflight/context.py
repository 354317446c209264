"""What every family of checks reads: the rendered deployment (and its topology), the model spec check-compat
uses, and each node's facts."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pdctl.preflight.report import Check

if TYPE_CHECKING:
    from pdctl.models import ModelSpec
    from pdctl.preflight.gather import NodeFacts
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology

NodeCheck = tuple[str, Check]  # (node name, check)
SERVER_ROLES = ("prefill", "decode", "colocated")


@dataclass
class Context:
    """One preflight's inputs."""

    deployment: Deployment
    spec: ModelSpec | None  # None when the topology's model resolves to nothing here (spec_error says why)
    spec_error: str | None
    facts: dict[str, NodeFacts]
    roles: dict[str, list[str]]
    controller_pdctl: str
    # file the launching machine wrote -> its content: every node must read the same (a shared run dir)
    shared_files: dict[str, str] = field(default_factory=dict)
    needed_dirs: dict[str, str] = field(default_factory=dict)  # what -> a directory every node must have

    @property
    def topo(self) -> Topology:
        return self.deployment.topo

    def reached(self, node: str) -> bool:
        return self.facts[node].ok

    def servers(self) -> list[str]:
        """Reached nodes that run a server role (they need the engine, the model, the transfer library)."""
        return [n for n, roles in self.roles.items() if self.reached(n) and any(r in SERVER_ROLES for r in roles)]

    def pd_nodes(self) -> list[str]:
        """Reached nodes that run prefill or decode."""
        return [n for n, roles in self.roles.items() if self.reached(n) and {"prefill", "decode"} & set(roles)]

    def fact(self, node: str, *keys: str) -> Any:
        """A nested fact of NODE (None if absent)."""
        value: Any = self.facts[node].facts
        for key in keys:
            if not isinstance(value, dict):
                return None
            value = value.get(key)
        return value

    def tool_output(self, node: str, key: str) -> tuple[str | None, str | None]:
        """(stdout, why not) of a tool the probe ran: (None, 'not installed' | error text)."""
        result = self.fact(node, key)
        if result is None:
            return None, "not installed"
        if result.get("rc") != 0:
            return None, f"exit {result.get('rc')}: {(result.get('err') or '').strip()[-300:]}"
        return result.get("out", ""), None
