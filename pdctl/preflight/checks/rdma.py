"""RDMA: the HCAs the topology names exist and have an ACTIVE port; with NIXL, UCX lists a transport that
can carry the topology's protocol between nodes (`ucx_info -d`)."""

from __future__ import annotations

from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.parsers.ib_sysfs import parse_ib_sysfs
from pdctl.preflight.parsers.ucx_info import parse_ucx_info, transports_for
from pdctl.preflight.report import failed, passed
from pdctl.transfer.registry import backend


def needed_protocol(ctx: Context) -> str:
    """What the KV transfer needs: the topology's protocol for SGLang; TCP for the CPU reference engine."""
    return "tcp" if ctx.topo.engine.kind == "reference" else ctx.topo.transfer.protocol


def run(ctx: Context) -> list[NodeCheck]:
    if not ctx.topo.is_pd:
        return []
    out: list[NodeCheck] = []
    protocol = needed_protocol(ctx)
    for name in ctx.pd_nodes():
        node = ctx.topo.node(name)
        devices = parse_ib_sysfs(ctx.fact(name, "ib_sysfs") or "")
        wanted = list(node.ib_devices) or ([ctx.topo.transfer.ib_device] if ctx.topo.transfer.ib_device else [])
        wanted = [d for w in wanted for d in w.split(",") if d]
        summary = {d.name: {p: port.state for p, port in d.ports.items()} for d in devices.values()}
        for dev in wanted:
            found = devices.get(dev.split(":")[0])
            if found is None:
                out.append((name, failed("rdma.device", f"{dev} is not in /sys/class/infiniband "
                                         f"(found: {', '.join(devices) or 'none'})", found=sorted(devices),
                                         expected=dev, fix="fix ib_devices / transfer.ib_device for this node")))
            elif not found.active:
                states = ", ".join(f"port {p}: {port.state}" for p, port in found.ports.items())
                out.append((name, failed("rdma.device", f"{dev} has no ACTIVE port ({states})", found=states,
                                         expected="ACTIVE", fix=f"bring {dev}'s link up (ibstat {dev}), or "
                                         "remove it from the topology")))
            else:
                rates = [p.rate_gbps for p in found.ports.values() if p.active and p.rate_gbps]
                out.append((name, passed("rdma.device", f"{dev} ACTIVE" + (f", {rates[0]:g} Gb/s" if rates else ""),
                                         summary.get(found.name))))
        if protocol == "rdma" and not wanted:
            active = [d.name for d in devices.values() if d.active]
            out.append((name, passed("rdma.devices", f"active HCAs: {', '.join(active)}", active) if active else
                        failed("rdma.devices", "transfer.protocol rdma, but no HCA has an ACTIVE port",
                               found=summary, fix="use transfer.protocol: tcp, or fix the HCAs")))
        if backend(ctx.topo.transfer.backend).ucx:
            out.append((name, _ucx(ctx, name, protocol)))
    return out


def _ucx(ctx: Context, name: str, protocol: str):  # type: ignore[no-untyped-def]
    text, why = ctx.tool_output(name, "ucx_info")
    if text is None:
        return failed("ucx.transports", f"ucx_info -d: {why}; cannot list UCX's transports", severity="warning",
                      fix="install UCX's tools (Debian: ucx-utils) to let preflight check the transports")
    usable = transports_for(parse_ucx_info(text), protocol)
    if not usable:
        return failed("ucx.transports", f"UCX lists no {protocol} transport between nodes", expected=protocol,
                      found=[r.name for r in parse_ucx_info(text)],
                      fix="check UCX_TLS / UCX_NET_DEVICES in engine.env and the HCA drivers (ucx_info -d)")
    return passed("ucx.transports", f"{protocol}: {', '.join(r.name for r in usable)}", [r.name for r in usable])
