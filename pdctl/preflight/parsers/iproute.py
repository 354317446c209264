"""`ip -o addr show` and `ip -o route get ADDR` text -> interface addresses and the device a peer is
reached through (the kernel's choice: what Mooncake's TCP transport and UCX's tcp use)."""

from __future__ import annotations

import re
from dataclasses import dataclass

_ADDR = re.compile(r"^\d+:\s+(?P<dev>[^\s@]+)(?:@\S+)?\s+(?P<fam>inet6?)\s+(?P<addr>[^/\s]+)")
_ROUTE = re.compile(r"\bdev\s+(?P<dev>\S+)(?:.*?\bsrc\s+(?P<src>\S+))?")


def parse_ip_addr(text: str) -> dict[str, list[str]]:
    """Interface -> its addresses (IPv4 and IPv6, without prefix length), from `ip -o addr show`."""
    out: dict[str, list[str]] = {}
    for line in text.splitlines():
        match = _ADDR.match(line.strip())
        if match:
            out.setdefault(match.group("dev"), []).append(match.group("addr"))
    return out


@dataclass(frozen=True)
class Route:
    """How the kernel reaches a destination: the device and the source address it uses."""

    device: str
    source: str | None

    @property
    def loopback(self) -> bool:
        return self.device == "lo"


def parse_ip_route_get(text: str) -> Route | None:
    """The first route line of `ip -o route get ADDR`, or None (unreachable: the command printed an error)."""
    for line in text.splitlines():
        match = _ROUTE.search(line)
        if match:
            return Route(match.group("dev"), match.group("src"))
    return None
