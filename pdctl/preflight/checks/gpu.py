"""GPUs: model and count against the topology's `gpu`/`gpus` (GB300/B200 vs H100/H200 decide rules such as
mxfp8), driver and CUDA versions, and the multi-node NVLink domain of GB200/GB300 NVL72 racks."""

from __future__ import annotations

from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.parsers.nvidia_smi import GpuInventory, parse_nvidia_smi_q
from pdctl.preflight.report import failed, passed
from pdctl.transfer.registry import NVLINK_CAPABLE, backend


def inventory(ctx: Context, node: str) -> tuple[GpuInventory | None, str | None]:
    """The node's parsed `nvidia-smi -q`, or why there is none."""
    text, why = ctx.tool_output(node, "nvidia_smi")
    if text is None:
        return None, why
    return parse_nvidia_smi_q(text), None


def run(ctx: Context) -> list[NodeCheck]:
    out: list[NodeCheck] = []
    for name in ctx.servers():
        node = ctx.topo.node(name)
        inv, why = inventory(ctx, name)
        if node.gpu == "cpu":
            seen = f"; nvidia-smi lists {len(inv.gpus)} GPU(s), unused" if inv and inv.gpus else ""
            out.append((name, passed("gpu", f"cpu (rank slots: {node.gpus}){seen}", "cpu", "cpu")))
            continue
        if inv is None:
            out.append((name, failed("gpu", f"nvidia-smi: {why}", expected=f"{node.gpus} x {node.gpu}",
                                     fix="install the NVIDIA driver on this node, or set gpu: cpu")))
            continue
        kinds = inv.kinds
        if kinds != [node.gpu]:
            out.append((name, failed("gpu.model", f"GPUs are {', '.join(g.name for g in inv.gpus[:1]) or 'none'} "
                                     f"({'/'.join(kinds) or 'none'}), the topology says {node.gpu}",
                                     found=kinds, expected=node.gpu,
                                     fix=f"set gpu: {kinds[0] if kinds else 'cpu'} for this node: check-compat's "
                                         "rules (mxfp8, attention backends) depend on it")))
        else:
            out.append((name, passed("gpu.model", f"{len(inv.gpus)} x {inv.gpus[0].name}", node.gpu, node.gpu)))
        if len(inv.gpus) < node.gpus:
            out.append((name, failed("gpu.count", f"{len(inv.gpus)} GPUs, the topology places {node.gpus}",
                                     found=len(inv.gpus), expected=node.gpus,
                                     fix=f"set gpus: {len(inv.gpus)} (and re-plan), or fix the node")))
        else:
            out.append((name, passed("gpu.count", f"{len(inv.gpus)} GPUs", len(inv.gpus), node.gpus)))
        out.append((name, passed("gpu.driver", f"driver {inv.driver_version}, CUDA {inv.cuda_version}",
                                 {"driver": inv.driver_version, "cuda": inv.cuda_version})))
    out += _nvlink(ctx)
    return out


def nvlink_domain(ctx: Context) -> bool | None:
    """True when every prefill and decode node shares one multi-node NVLink domain, False when they do not,
    None when it does not apply (CPU nodes, a node without nvidia-smi)."""
    nodes = ctx.pd_nodes()
    if not nodes or any(ctx.topo.node(n).gpu == "cpu" for n in nodes):
        return None
    domains = []
    for name in nodes:
        inv, _ = inventory(ctx, name)
        if inv is None:
            return None
        domains.append(inv.domains)
    common = set.intersection(*domains) if domains else set()
    return len(nodes) > 1 and all(len(d) == 1 for d in domains) and len(common) == 1


def _nvlink(ctx: Context) -> list[NodeCheck]:
    topo = ctx.topo
    if not topo.is_pd:
        return []
    shared = nvlink_domain(ctx)
    mode = topo.transfer.nvlink
    out: list[NodeCheck] = []
    nodes = ctx.pd_nodes()
    for name in nodes:
        inv, _ = inventory(ctx, name)
        if inv is None or topo.node(name).gpu == "cpu":
            continue
        bad = [g for g in inv.gpus if g.fabric and g.fabric.state and g.fabric.state.lower() == "completed"
               and (g.fabric.status or "").lower() not in ("success", "")]
        if bad and topo.node(name).gpu in ("gb200", "gb300"):
            out.append((name, failed("nvlink.fabric", f"fabric registration failed on {len(bad)} GPU(s): status "
                                     f"{bad[0].fabric.status!r}", found=bad[0].fabric.status, expected="Success",
                                     severity="warning" if mode == "off" else "error",
                                     fix="check nvidia-fabricmanager / NMX on the rack (GPUs are not in an "
                                         "NVLink domain; multi-node NVLink transfers will fail or fall back)")))
        domains = sorted(inv.domains)
        if domains:
            out.append((name, passed("nvlink.domain", f"NVLink domain {domains[0][0]} clique {domains[0][1]}",
                                     [list(d) for d in domains])))
        if shared and mode != "off":
            channels = ctx.fact(name, "imex_channels")
            if not channels:
                out.append((name, failed("nvlink.imex", "no IMEX channel devices (/dev/nvidia-caps-imex-channels): "
                                         "cross-node NVLink memory cannot be imported", expected="channel0",
                                         fix="start nvidia-imex on the rack's nodes and create the channel "
                                             "(e.g. a Slurm job with IMEX channels)")))
    if mode == "on" and shared is not True and nodes:
        out.append((nodes[0], failed("nvlink.mode", "transfer.nvlink: on, but the prefill and decode nodes do "
                                     "not share one NVLink domain (same fabric ClusterUUID and CliqueId)",
                                     found=shared, expected=True,
                                     fix="place prefill and decode in one NVL72 rack, or set transfer.nvlink: "
                                         "off/auto")))
    if shared and mode != "off" and nodes:
        entry = backend(topo.transfer.backend)
        if not entry.nvlink_env:
            out.append((nodes[0], failed("nvlink.backend", f"the nodes share an NVLink domain, but with {entry.title} "
                                         f"{entry.no_nvlink}: KV will go over the NIC", severity="warning",
                                         fix=f"use transfer.backend: {' or '.join(NVLINK_CAPABLE)} to move KV over "
                                             "NVLink")))
        else:
            machines = {ctx.fact(n, "python", "machine") for n in nodes}
            if machines - {"aarch64", "arm64"}:
                out.append((nodes[0], failed("nvlink.build", "Mooncake release wheels are built with MNNVL only "
                                             f"for arm64; these nodes are {', '.join(sorted(map(str, machines)))}",
                                             severity="warning", fix="build Mooncake with -DUSE_MNNVL=ON")))
            out.append((nodes[0], passed("nvlink.transfer", "Mooncake will use multi-node NVLink "
                                         "(SGLANG_MOONCAKE_CUSTOM_MEM_POOL=NVLINK, MC_FORCE_MNNVL=True)", True)))
    return out
