"""What preflight found: checks per node, cross-node transfers, and the verdict (CLI.md's preflight JSON).

A check says what was found, what was expected and the fix; `ok` of the whole report is false as soon as one
error-severity check failed or one transfer could not be verified — the verdict must be able to say no.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Severity = str  # "error" | "warning" | "info"


@dataclass(frozen=True)
class Check:
    """One fact checked on one node."""

    check: str  # id, e.g. "versions.sglang", "model.config", "rdma.ib_device"
    ok: bool
    severity: Severity
    message: str
    found: Any = None
    expected: Any = None
    fix: str | None = None

    @property
    def failed(self) -> bool:
        """An error that did not pass: what makes preflight exit 1."""
        return not self.ok and self.severity == "error"

    def to_json(self) -> dict[str, Any]:
        return {
            "check": self.check, "ok": self.ok, "severity": self.severity, "message": self.message,
            "found": self.found, "expected": self.expected, "fix": self.fix,
        }


def passed(check: str, message: str, found: Any = None, expected: Any = None) -> Check:
    return Check(check, True, "info", message, found, expected)


def failed(check: str, message: str, *, found: Any = None, expected: Any = None, fix: str | None = None,
           severity: Severity = "error") -> Check:
    return Check(check, False, severity, message, found, expected, fix)


@dataclass
class NodeReport:
    """The checks of one node."""

    node: str
    host: str
    roles: list[str]
    checks: list[Check] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)  # a short summary for the table and JSON

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "host": self.host, "roles": self.roles, "facts": self.facts,
                "checks": [c.to_json() for c in self.checks]}


@dataclass
class TransferResult:
    """One prefill node -> decode node KV transfer, run for real with the topology's backend."""

    source: str
    target: str
    backend: str
    transport: str  # e.g. "tcp/pd0 (inter-node)", "mooncake tcp via eth1", or why unknown
    crosses_nodes: bool | None
    gbps: float
    us_per_descriptor: float
    verified: bool
    descriptors: int = 0
    bytes: int = 0
    expected_gbps: float | None = None
    error: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verified and self.error is None

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.source, "to": self.target, "backend": self.backend, "transport": self.transport,
            "crosses_nodes": self.crosses_nodes, "gbps": self.gbps, "us_per_descriptor": self.us_per_descriptor,
            "verified": self.verified, "descriptors": self.descriptors, "bytes": self.bytes,
            "expected_gbps": self.expected_gbps, "error": self.error, "details": self.details,
        }


@dataclass
class PreflightReport:
    """Everything one preflight run found."""

    topology: str
    nodes: list[NodeReport]
    transfers: list[TransferResult] = field(default_factory=list)
    nvlink_domain: bool | None = None  # every prefill/decode node in one multi-node NVLink domain
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    transfer_plan: dict[str, Any] | None = None  # pdctl.preflight.pairs.TransferPlan.to_json()
    agents: dict[str, Any] = field(default_factory=dict)  # node -> its transfer agent's pid and hostname
    expired: list[str] = field(default_factory=list)  # what still ran (or had not started) at the deadline
    deadline_s: float | None = None

    @property
    def ok(self) -> bool:
        return not self.failures() and all(t.ok for t in self.transfers) and not self.expired

    def failures(self) -> list[tuple[str, Check]]:
        """(node, check) of every failed error-severity check."""
        return [(n.node, c) for n in self.nodes for c in n.checks if c.failed]

    def summary(self) -> str:
        """One line per failure: node, fact, fix (preflight's exit-1 message, also launch's)."""
        lines = [f"preflight of {self.topology} failed ({len(self.failures())} check(s))"]
        if self.expired:
            lines.append(f"- the deadline ({self.deadline_s:g}s) expired; still running: {', '.join(self.expired)} "
                         "(fix: --deadline S for more time, --transfers cover for fewer pairs)")
        for node, check in self.failures():
            lines.append(f"- {node}: {check.check}: {check.message}" + (f" (fix: {check.fix})" if check.fix else ""))
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {
            "ok": self.ok, "topology": self.topology, "wall_s": round(self.wall_s, 3),
            "nvlink_domain": self.nvlink_domain, "notes": list(self.notes),
            "nodes": [n.to_json() for n in self.nodes], "transfers": [t.to_json() for t in self.transfers],
            "transfer_plan": self.transfer_plan, "agents": self.agents,
            "deadline": {"seconds": self.deadline_s, "expired": bool(self.expired), "still_running": self.expired},
        }
