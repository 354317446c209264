"""Mooncake TransferEngine's log lines (glog, on stderr) -> the transport it installed and where it listens.

Mooncake says what it chose at initialisation: `Transfer Engine RPC using P2P handshake, listening on
<ip>:<port>`, `Topology discovery complete. Found <n> HCAs.`, and `TcpTransport: listen on port <p>` for the
TCP transport (RDMA: `RdmaTransport` lines naming the HCAs; NVLink: `NvlinkTransport`/MNNVL lines). The device
a TCP transfer leaves through is the kernel's route to the peer (parsers.iproute).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_RPC = re.compile(r"listening on (?P<addr>\S+?):(?P<port>\d+)\b")
_HCAS = re.compile(r"Found (?P<n>\d+) HCAs")
_TRANSPORT = re.compile(r"\b(?P<name>Tcp|Rdma|Nvlink|IntraNodeNvlink|Mnnvl|Efa|Cxl)Transport\b", re.IGNORECASE)


@dataclass
class MooncakeSetup:
    """What one Mooncake engine reported about itself."""

    rpc_address: str | None = None
    hcas: int | None = None
    transports: list[str] = field(default_factory=list)  # lower-case: tcp, rdma, nvlink, ...

    @property
    def transport(self) -> str | None:
        """The transport in use (the first one installed), lower-case."""
        return self.transports[0] if self.transports else None


def parse_mooncake_log(text: str) -> list[MooncakeSetup]:
    """One MooncakeSetup per engine initialisation found in TEXT (a process may start several)."""
    out: list[MooncakeSetup] = []
    for line in text.splitlines():
        if "Transfer Engine RPC" in line and (match := _RPC.search(line)):
            out.append(MooncakeSetup(rpc_address=match.group("addr")))
            continue
        if not out:
            continue
        if match := _HCAS.search(line):
            out[-1].hcas = int(match.group("n"))
        elif match := _TRANSPORT.search(line):
            name = match.group("name").lower()
            if name not in out[-1].transports:
                out[-1].transports.append(name)
    return out
