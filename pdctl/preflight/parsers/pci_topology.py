"""Where HCAs and GPUs sit in the PCIe tree, and which HCAs are GPU-affine (pure: the probe's `pci` lines).

An HCA is GPU-affine when it shares a PCIe switch with an NVIDIA GPU: their sysfs device paths have a PCI
device (a bridge: a root port or a switch port) in common below the host bridge (NCCL's PIX/PXB). A
management NIC or a BlueField's host-facing function sits on a root port of its own and shares only the host
bridge (`pci0000:00`) with the GPUs. This is dynamo PR #10852's filter: scoping UCX_NET_DEVICES to the
GPU-affine ACTIVE ports avoids the bare NIXL_ERR_BACKEND that binding the management/BlueField NICs causes.
On systems where no HCA shares a switch with a GPU (GB200/GB300: the GPUs hang off the CPU's C2C link)
affinity is unknown, and every ACTIVE port counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_BDF = re.compile(r"^[0-9a-fA-F]{4,}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


@dataclass(frozen=True)
class PciDevice:
    name: str  # mlx5_0, or the GPU's bus id
    path: str  # the sysfs device path (/sys/devices/pci0000:00/0000:00:01.0/...)
    netdevs: tuple[str, ...] = ()

    @property
    def chain(self) -> list[str]:
        """The path's components below /sys/devices: the host bridge, then PCI devices down to this one."""
        parts = [p for p in self.path.split("/") if p]
        return parts[parts.index("devices") + 1:] if "devices" in parts else parts


@dataclass
class PciTopology:
    hcas: dict[str, PciDevice] = field(default_factory=dict)
    gpus: dict[str, PciDevice] = field(default_factory=dict)

    def affine(self, hca: str) -> list[str]:
        """The GPUs sharing a PCIe switch (any PCI bridge below the host bridge) with HCA."""
        dev = self.hcas.get(hca)
        if dev is None or dev.path == "-":
            return []
        return [g for g, gpu in self.gpus.items() if _shares_bridge(dev.chain, gpu.chain)]

    def affine_hcas(self) -> set[str] | None:
        """HCAs that share a switch with some GPU; None when none does (affinity unknown here)."""
        found = {h for h in self.hcas if self.affine(h)}
        return found or None


def _shares_bridge(a: list[str], b: list[str]) -> bool:
    common = 0
    for x, y in zip(a, b):
        if x != y:
            break
        common += 1
    return any(_BDF.match(part) for part in a[:common])


def parse_pci(text: str) -> PciTopology:
    """The probe's `ib <device> <path> <netdevs>` / `gpu <bdf> <path>` lines ('#' lines are comments)."""
    topo = PciTopology()
    for line in text.splitlines():
        parts = line.split()
        if not parts or parts[0].startswith("#"):
            continue
        if parts[0] == "ib" and len(parts) >= 3:
            nets = tuple(n for n in (parts[3] if len(parts) > 3 else "-").split(",") if n and n != "-")
            topo.hcas[parts[1]] = PciDevice(parts[1], parts[2], nets)
        elif parts[0] == "gpu" and len(parts) >= 3:
            topo.gpus[parts[1]] = PciDevice(parts[1], parts[2])
    return topo
