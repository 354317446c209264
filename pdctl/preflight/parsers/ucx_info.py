"""`ucx_info -d` text -> the transports and devices UCX can use on a node.

Two layouts exist in the field: UCX >= 1.9 prints `Transport:` then one `Device:` (and `Type:`) per
resource; older releases print one `Transport:` followed by several `Device:` blocks. Both reduce to
(memory domain, transport, device) triples.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_FIELD = re.compile(r"^#\s*(?P<key>Memory domain|Component|component|Transport|Device|Type)\s*:\s*(?P<value>.+?)\s*$")


@dataclass(frozen=True)
class UcxResource:
    """One transport on one device, e.g. ('mlx5_0', 'rc_mlx5', 'mlx5_0:1', 'network')."""

    memory_domain: str
    transport: str
    device: str
    type: str | None = None

    @property
    def name(self) -> str:
        """UCX's own spelling in logs and UCX_PROTO_INFO tables: transport/device."""
        return f"{self.transport}/{self.device}"


def parse_ucx_info(text: str) -> list[UcxResource]:
    """Every (transport, device) resource `ucx_info -d` lists, in order."""
    out: list[UcxResource] = []
    md = transport = ""
    for line in text.splitlines():
        match = _FIELD.match(line.strip())
        if match is None:
            continue
        key, value = match.group("key").lower(), match.group("value")
        if key == "memory domain":
            md, transport = value, ""
        elif key == "transport":
            transport = value
        elif key == "device" and transport:
            out.append(UcxResource(md, transport, value))
        elif key == "type" and out and out[-1].type is None and out[-1].transport == transport:
            last = out[-1]
            out[-1] = UcxResource(last.memory_domain, last.transport, last.device, value)
    return out


# What a transfer needs from UCX: RDMA = a verbs transport on an HCA port; TCP = tcp on some interface.
RDMA_TRANSPORTS = frozenset({"rc_mlx5", "dc_mlx5", "ud_mlx5", "rc_verbs", "ud_verbs", "rc", "dc", "ud"})


def transports_for(resources: list[UcxResource], protocol: str) -> list[UcxResource]:
    """The resources that can carry KV for PROTOCOL ('rdma' | 'tcp') between nodes (loopback excluded)."""
    if protocol == "rdma":
        return [r for r in resources if r.transport in RDMA_TRANSPORTS]
    return [r for r in resources if r.transport == "tcp" and r.device != "lo"]
