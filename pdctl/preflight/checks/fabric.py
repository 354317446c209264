"""Fabric scoping: which network devices UCX (NIXL) may use, and whether GPU memory can be registered for RDMA.

Three field incidents, each a bare error at server start or first transfer:
* UCX_NET_DEVICES (or its default `all`) binding inactive HCAs or management/BlueField NICs: NIXL's UCX
  backend fails with a bare NIXL_ERR_BACKEND (dynamo PR #10852). pdctl derives the GPU-affine ACTIVE ports
  from sysfs (parsers.pci_topology) and prints a ready-to-use value.
* UCX_NET_DEVICES listing only RDMA ports drops TCP, loopback included: NIXL's endpoint to itself then has
  no active-message transport unless an RDMA port reaches itself (sglang PR #40641). Nothing usable left at
  all is an error (NIXL_ERR_BACKEND at createBackend, reproduced with NIXL 1.5.1: tests/preflight/
  test_fabric_real.py); only RDMA ports is a warning (fabric-dependent: UD unreachable on some RoCE fabrics).
* GPU memory that cannot be registered for RDMA: neither nvidia_peermem nor DMA-BUF (the open NVIDIA kernel
  module on Linux >= 5.12). Mooncake then says only "DMA BUF supported required for GPU RDMA without
  nvidia-peermem"; NIXL falls back or fails per transfer. The check names the missing piece.
"""

from __future__ import annotations

from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.parsers.ib_sysfs import IbDevice, parse_ib_sysfs
from pdctl.preflight.parsers.iproute import parse_ip_addr
from pdctl.preflight.parsers.pci_topology import parse_pci
from pdctl.preflight.parsers.ucx_env import NetDevice, dmabuf_missing, parse_net_devices, tcp_allowed
from pdctl.preflight.report import Check, failed, passed
from pdctl.sglang import messages
from pdctl.transfer.registry import backend

DYNAMO_10852 = "https://github.com/ai-dynamo/dynamo/pull/10852"
SGLANG_40641 = "https://github.com/sgl-project/sglang/pull/40641"


def run(ctx: Context) -> list[NodeCheck]:
    if not ctx.topo.is_pd:
        return []
    out: list[NodeCheck] = []
    for name in ctx.pd_nodes():
        node = ctx.topo.node(name)
        view = FabricView.of(ctx, name)
        if backend(ctx.topo.transfer.backend).ucx:  # UCX_NET_DEVICES and NIXL's own endpoint: UCX's business
            out.append((name, view.net_devices()))
            out.append((name, view.self_endpoint(ctx.topo.transfer.protocol)))
        if node.gpu != "cpu" and ctx.topo.transfer.protocol == "rdma":
            out.append((name, view.gpu_affinity()))
            out.append((name, gpu_registration(ctx.fact(name, "gdr") or {})))
    return out


def servers_env(ctx: Context, node: str) -> tuple[dict[str, str], dict[str, str]]:
    """The environment the topology gives NODE's servers (engine.env with its roles' env over it, prefill's over
    decode's on a node with both, as in their commands) and, per variable, the section that set it."""
    env = dict(ctx.topo.engine.env)
    where = dict.fromkeys(env, "engine.env")
    for role in ("decode", "prefill", "colocated"):
        if role in ctx.roles.get(node, []):
            own = ctx.topo.role(role).env
            env |= own
            where |= dict.fromkeys(own, f"{role}.env")
    return env, where


class FabricView:
    """One node's HCA ports, their GPU affinity, its IP interfaces and the UCX environment its servers get."""

    def __init__(self, devices: dict[str, IbDevice], affine: set[str] | None, netdevs: set[str],
                 net_devices: str | None, tls: str | None, source: str) -> None:
        self.devices, self.affine, self.netdevs = devices, affine, netdevs
        self.value, self.tls, self.source = net_devices, tls, source

    @classmethod
    def of(cls, ctx: Context, node: str) -> FabricView:
        env, where = servers_env(ctx, node)
        probe_env = ctx.fact(node, "ucx_env") or {}
        gpu_node = ctx.topo.node(node).gpu != "cpu"
        affine = parse_pci(ctx.fact(node, "pci") or "").affine_hcas() if gpu_node else None
        value, source = (env["UCX_NET_DEVICES"], where["UCX_NET_DEVICES"]) if "UCX_NET_DEVICES" in env else (
            probe_env.get("UCX_NET_DEVICES"), "the node's environment")
        return cls(parse_ib_sysfs(ctx.fact(node, "ib_sysfs") or ""), affine,
                   set(parse_ip_addr((ctx.fact(node, "ip_addr") or {}).get("out", ""))), value,
                   env.get("UCX_TLS", probe_env.get("UCX_TLS")), source)

    def ports(self, *, active: bool) -> list[str]:
        return sorted(f"{d.name}:{p}" for d in self.devices.values() for p, port in d.ports.items()
                      if port.active == active)

    def recommended(self) -> str | None:
        """GPU-affine ACTIVE ports (every ACTIVE port when affinity is unknown), plus lo for NIXL's self
        endpoint (sglang PR #40641's fix); None on a node without an active HCA."""
        ports = [p for p in self.ports(active=True) if self.affine is None or p.split(":")[0] in self.affine]
        return ",".join([*ports, "lo"]) if ports else None

    def _advice(self) -> str:
        value = self.recommended()
        return f"set UCX_NET_DEVICES={value} in engine.env" if value else "leave UCX_NET_DEVICES unset"

    def net_devices(self) -> Check:
        listed = parse_net_devices(self.value)
        inactive = self.ports(active=False)
        stray = [p for p in self.ports(active=True) if self.affine is not None and p.split(":")[0] not in self.affine]
        if listed is None:
            risky = ([f"inactive port(s) {', '.join(inactive)}"] if inactive else []) + (
                [f"port(s) sharing no PCIe switch with a GPU (management or BlueField NICs?) {', '.join(stray)}"]
                if stray else [])
            if not risky:
                return passed("ucx.net_devices",
                              f"UCX_NET_DEVICES unset: every port ({', '.join(self.ports(active=True)) or 'no HCA'})")
            return failed("ucx.net_devices", f"UCX_NET_DEVICES is unset (all): UCX also opens {'; '.join(risky)}, "
                          f"which makes NIXL fail with a bare NIXL_ERR_BACKEND ({DYNAMO_10852})", found="all",
                          expected=self.recommended(), fix=self._advice(), severity="warning")
        rdma = [str(d) for d in listed if d.rdma]
        down = [d for d in rdma if d in inactive]
        if down:
            return failed("ucx.net_devices", f"UCX_NET_DEVICES ({self.source}) lists inactive port(s) "
                          f"{', '.join(down)}: NIXL fails with a bare NIXL_ERR_BACKEND ({DYNAMO_10852})",
                          found=self.value, expected=self.recommended(), fix=self._advice())
        present = set(self.ports(active=True))
        missing = [d for d in rdma if d not in present]
        missing += [d.name for d in listed if not d.rdma and self.netdevs and d.name not in self.netdevs]
        odd = [d for d in rdma if d in stray]
        what = []
        if missing:
            what.append(f"no such device on this node: {', '.join(missing)} (UCX: 'network device ... is not "
                        "available', ignored)")
        if odd:
            what.append(f"not GPU-affine (no PCIe switch shared with a GPU: management/BlueField?): {', '.join(odd)}")
        if what:
            return failed("ucx.net_devices", f"UCX_NET_DEVICES ({self.source}) = {self.value}: " + "; ".join(what),
                          found=self.value, expected=self.recommended(), fix=self._advice(), severity="warning")
        return passed("ucx.net_devices", f"UCX_NET_DEVICES={self.value} ({self.source})", self.value)

    def self_endpoint(self, protocol: str) -> Check:
        listed = parse_net_devices(self.value)
        if listed is None:
            return passed("ucx.self_endpoint", "every device (UCX_NET_DEVICES unset): loopback included")
        ip = [d for d in listed if not d.rdma and (d.name in self.netdevs or not self.netdevs)]
        rdma_ok = [d for d in listed if d.rdma and str(d) in self.ports(active=True)]
        usable_ip = ip if tcp_allowed(self.tls) else []
        if usable_ip:
            return passed("ucx.self_endpoint", f"tcp on {', '.join(str(d) for d in usable_ip)}")
        if not rdma_ok:
            return failed("ucx.self_endpoint", f"UCX_NET_DEVICES ({self.source}) = {self.value} leaves NIXL no "
                          "active-message transport for the endpoint it opens to itself: createBackend fails with "
                          f"NIXL_ERR_BACKEND ({SGLANG_40641})", found=self.value, expected="a usable device, e.g. lo",
                          fix=f"add lo to UCX_NET_DEVICES ({self._advice()})")
        return failed("ucx.self_endpoint", f"UCX_NET_DEVICES ({self.source}) lists only RDMA ports "
                      f"({', '.join(str(d) for d in rdma_ok)}): TCP and loopback are dropped, and NIXL's endpoint to "
                      "itself depends on the RDMA transport reaching its own port (UD is unreachable on some RoCE "
                      f"fabrics: NIXL_ERR_BACKEND, {SGLANG_40641})", found=self.value,
                      fix="add lo to UCX_NET_DEVICES", severity="warning")

    def gpu_affinity(self) -> Check:
        active = self.ports(active=True)
        if not active:
            return failed("rdma.gpu_affinity", "no ACTIVE HCA port: KV cannot go over RDMA from this node",
                          found=self.ports(active=False), fix="fix the HCAs, or use transfer.protocol: tcp")
        if self.affine is None:
            return passed("rdma.gpu_affinity", f"no HCA shares a PCIe switch with a GPU here (affinity unknown): "
                          f"UCX_NET_DEVICES={self.recommended()}", self.recommended())
        return passed("rdma.gpu_affinity", f"GPU-affine ACTIVE ports: UCX_NET_DEVICES={self.recommended()}",
                      self.recommended())


def gpu_registration(gdr: dict) -> Check:
    """nvidia_peermem loaded, or DMA-BUF available; else the missing pieces, named."""
    if gdr.get("peermem"):
        return passed("gpu.rdma_registration", "nvidia_peermem is loaded", "nvidia_peermem")
    missing = dmabuf_missing(gdr.get("kernel"), gdr.get("nvidia_version"))
    if not missing:
        return passed("gpu.rdma_registration", f"DMA-BUF (open NVIDIA kernel module, Linux {gdr.get('kernel')})",
                      "dmabuf")
    return failed("gpu.rdma_registration", "GPU memory cannot be registered for RDMA: nvidia_peermem is not loaded, "
                  f"and DMA-BUF is unavailable: {'; '.join(missing)} (Mooncake: '{messages.MOONCAKE_NO_PEERMEM}')",
                  found={"peermem": False, "kernel": gdr.get("kernel"), "nvidia": gdr.get("nvidia_version")},
                  expected="nvidia_peermem or DMA-BUF",
                  fix="modprobe nvidia_peermem (shipped with the NVIDIA driver; needs MLNX_OFED/DOCA), or install "
                      "the open NVIDIA GPU kernel modules on Linux >= 5.12 for DMA-BUF")


__all__ = ["FabricView", "NetDevice", "gpu_registration", "run"]
