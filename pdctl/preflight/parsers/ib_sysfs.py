"""/sys/class/infiniband as `path:value` lines -> HCA ports and their state.

preflight's node probe prints the files it reads under /sys/class/infiniband as `<device>/ports/<n>/<file>:
<value>` lines (what `grep -H . /sys/class/infiniband/*/ports/*/state ...` prints, relative to that
directory); the kernel writes `state` as `4: ACTIVE`, `phys_state` as `5: LinkUp`, `rate` as
`400 Gb/sec (4X NDR)`, `link_layer` as `InfiniBand` or `Ethernet` (RoCE).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field


@dataclass
class IbPort:
    """One HCA port."""

    state: str | None = None  # ACTIVE, DOWN, INIT, ARMED
    phys_state: str | None = None  # LinkUp, Disabled, Polling
    link_layer: str | None = None
    rate_gbps: float | None = None

    @property
    def active(self) -> bool:
        return self.state == "ACTIVE"


@dataclass
class IbDevice:
    """One HCA (mlx5_0, ...) with its ports by number."""

    name: str
    hca_type: str | None = None
    ports: dict[str, IbPort] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        """At least one port is ACTIVE."""
        return any(p.active for p in self.ports.values())


def _enum(value: str) -> str:
    """'4: ACTIVE' -> 'ACTIVE'."""
    return value.split(":", 1)[1].strip() if ":" in value else value.strip()


def parse_ib_sysfs(text: str) -> dict[str, IbDevice]:
    """Devices by name from `<device>/[ports/<n>/]<file>:<value>` lines ('#' lines are comments)."""
    devices: dict[str, IbDevice] = {}
    for line in text.splitlines():
        if not line.strip() or line.startswith("#") or ":" not in line:
            continue
        path, value = line.split(":", 1)
        parts = path.strip("/").split("/")
        device = devices.setdefault(parts[0], IbDevice(parts[0]))
        value = value.strip()
        if len(parts) == 2:
            if parts[1] == "hca_type":
                device.hca_type = value
        elif len(parts) == 4 and parts[1] == "ports":
            port = device.ports.setdefault(parts[2], IbPort())
            if parts[3] == "state":
                port.state = _enum(value)
            elif parts[3] == "phys_state":
                port.phys_state = _enum(value)
            elif parts[3] == "link_layer":
                port.link_layer = value
            elif parts[3] == "rate":
                match = re.match(r"([\d.]+)\s*Gb/sec", value)
                port.rate_gbps = float(match.group(1)) if match else None
    return devices
