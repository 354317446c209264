"""UCX's device and transport selection from the environment (pure): UCX_NET_DEVICES and UCX_TLS.

UCX_NET_DEVICES is a comma list of network devices: RDMA ports as `<hca>:<port>` (mlx5_0:1), IP interfaces
by name (eth0, lo), or `all` (UCX's default). UCX applies it to every network transport: listing only RDMA
ports also drops TCP, including loopback — which leaves NIXL without an active-message transport for the
endpoint it opens to itself during createBackend on fabrics whose UD is unreachable (sglang PR #40641;
NIXL 1.5.1 on a machine without that HCA: `createBackend: backend 'UCX' encountered error during intra-agent
transfer setup with status NIXL_ERR_BACKEND`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class NetDevice:
    name: str  # mlx5_0, eth0, lo
    port: str | None  # "1" for an RDMA port, None for an IP interface

    @property
    def rdma(self) -> bool:
        return self.port is not None

    def __str__(self) -> str:
        return f"{self.name}:{self.port}" if self.port is not None else self.name


def parse_net_devices(value: str | None) -> list[NetDevice] | None:
    """The devices UCX_NET_DEVICES lists; None when unset or `all` (every device)."""
    if value is None or not value.strip() or value.strip().lower() == "all":
        return None
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        name, _, port = item.partition(":")
        out.append(NetDevice(name, port or None))
    return out


def tcp_allowed(tls: str | None) -> bool:
    """Whether UCX_TLS leaves the tcp transport in (unset, `all`, `tcp` listed, or an exclusion list without it)."""
    if tls is None or not tls.strip():
        return True
    names = [t.strip().lstrip("^").split(":")[0] for t in tls.split(",") if t.strip()]
    if tls.strip().startswith("^"):
        return "tcp" not in names
    return "tcp" in names or "all" in names


def dmabuf_missing(kernel: str | None, nvidia_version: str | None) -> list[str]:
    """What DMA-BUF registration of GPU memory lacks on a node (empty: available): Linux >= 5.12
    (ibv_reg_dmabuf_mr) and the open NVIDIA GPU kernel module (the proprietary one exports no DMA-BUF)."""
    missing = []
    try:
        major, minor = (int(x) for x in (kernel or "").split(".")[:2])
        if (major, minor) < (5, 12):
            missing.append(f"Linux {kernel} is older than 5.12")
    except ValueError:
        missing.append(f"kernel release {kernel!r} not readable")
    if not nvidia_version:
        missing.append("no NVIDIA kernel module is loaded (/proc/driver/nvidia/version)")
    elif "Open Kernel Module" not in nvidia_version:
        missing.append("the NVIDIA kernel module is the proprietary one (DMA-BUF needs the open GPU kernel modules)")
    return missing
