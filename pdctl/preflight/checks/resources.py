"""Ports every process binds on its node are free, and disk / memory headroom."""

from __future__ import annotations

from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.report import failed, passed
from pdctl.topology.placement import port_bindings

GIB = 1 << 30
MIN_FREE_DISK = 1 * GIB
MIN_FREE_MEMORY = 1 * GIB


def run(ctx: Context) -> list[NodeCheck]:
    out: list[NodeCheck] = []
    what = {(node, port): label for node, port, label in port_bindings(ctx.topo, ctx.deployment.placements)}
    for name in [n for n in ctx.facts if ctx.reached(n)]:
        for host, port, state in ctx.fact(name, "ports") or []:
            label = what.get((name, port), "a server")
            if state == "free":
                out.append((name, passed("port", f"{host}:{port} free ({label})", state)))
            elif state == "in use":
                out.append((name, failed("port", f"{host}:{port} ({label}) is already in use on this node",
                                         found=state, expected="free",
                                         fix=f"stop what listens on port {port} (ss -ltnp 'sport = :{port}') or "
                                             "change the port in the topology")))
            else:
                out.append((name, failed("port", f"{host}:{port} ({label}): {state}", found=state, expected="free",
                                         fix="the address is not one of this node's: fix host/advertise_host")))
        for path, free in (ctx.fact(name, "disk_free") or {}).items():
            if isinstance(free, int) and free < MIN_FREE_DISK:
                out.append((name, failed("disk", f"{free / GIB:.1f} GiB free at {path}", found=free,
                                         expected=MIN_FREE_DISK, severity="warning", fix="free disk space")))
            elif isinstance(free, int):
                out.append((name, passed("disk", f"{free / GIB:.0f} GiB free at {path}", free)))
        memory = ctx.fact(name, "memory") or {}
        avail = memory.get("MemAvailable")
        if isinstance(avail, int):
            check = passed("memory", f"{avail / GIB:.1f} of {memory.get('MemTotal', 0) / GIB:.1f} GiB available",
                           avail) if avail >= MIN_FREE_MEMORY else failed(
                "memory", f"only {avail / GIB:.2f} GiB of host memory available", found=avail,
                expected=MIN_FREE_MEMORY, severity="warning", fix="stop what uses the node's memory")
            out.append((name, check))
    return out
