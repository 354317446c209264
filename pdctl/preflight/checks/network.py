"""Addresses: each node's advertised address is one of its own (else peers would connect to the wrong machine
or nowhere), and every address a node must reach resolves there and is routed to another machine, not back
into the node itself (decode -> prefill bootstrap and KV, router -> servers)."""

from __future__ import annotations

import ipaddress

from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.parsers.iproute import parse_ip_addr, parse_ip_route_get
from pdctl.preflight.report import failed, passed


def _is_ip(text: str) -> bool:
    try:
        ipaddress.ip_address(text)
    except ValueError:
        return False
    return True


def run(ctx: Context) -> list[NodeCheck]:
    out: list[NodeCheck] = []
    for name in [n for n in ctx.facts if ctx.reached(n)]:
        node = ctx.topo.node(name)
        own = {a for addrs in parse_ip_addr((ctx.fact(name, "ip_addr") or {}).get("out", "")).values() for a in addrs}
        resolved = ctx.fact(name, "resolve") or {}
        addrs = resolved.get(node.address)
        if isinstance(addrs, dict):
            out.append((name, failed("address", f"{node.address} does not resolve on the node itself: "
                                     f"{addrs.get('error')}", expected=node.address,
                                     fix="use an address, or a name this node resolves (/etc/hosts, DNS)")))
        elif own and addrs and not set(addrs) & own:
            out.append((name, failed("address", f"advertises {node.address} ({', '.join(addrs)}), which is not an "
                                     f"address of this node (it has {', '.join(sorted(own))})",
                                     found=sorted(own), expected=node.address,
                                     fix="set host (or advertise_host) to an address of this node's interface "
                                         "that its peers reach")))
        else:
            how = "" if _is_ip(node.address) else f" = {', '.join(addrs or [])}"
            out.append((name, passed("address", f"advertises {node.address}{how}", node.address)))
        for peer, result in (ctx.fact(name, "routes") or {}).items():
            route = parse_ip_route_get((result or {}).get("out", "")) if (result or {}).get("rc") == 0 else None
            if route is None:
                why = (result or {}).get("err", "").strip() or "no route"
                out.append((name, failed("reach.peer", f"cannot reach peer {peer}: {why}", expected=peer,
                                         fix="check the peer's host/advertise_host and this node's routes")))
            elif route.loopback:
                out.append((name, failed("reach.peer", f"peer {peer} is routed through loopback: it is this "
                                         "node's own address, not another machine's", found="lo",
                                         fix="give every node its own address in the topology")))
            else:
                out.append((name, passed("reach.peer", f"{peer} via {route.device}" +
                                         (f" (from {route.source})" if route.source else ""), route.device)))
    return out
