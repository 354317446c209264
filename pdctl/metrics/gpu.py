"""GPU telemetry of one node, from a dcgm-exporter's Prometheus text or from `nvidia-smi -q` (pure: parsing and
aggregation; pdctl.launch.gpus gathers the texts).

A device is one GPU, or one MIG instance of it: dcgm-exporter labels a MIG instance's series with GPU_I_ID (and
GPU_I_PROFILE) next to the GPU's `gpu` index, so a device is keyed by (gpu, GPU_I_ID) and every label set of a
field is read — never the first or the last series of a name (a MIG'd A800 exports three series for gpu="0").
Other labels (Kubernetes pod/namespace/container, Hostname, driver) do not make a device; two series of one
device (one per pod sharing it) take the larger value. The node's summary then aggregates over devices: sums for
memory and traffic, mean and max for activity, and every device with a nonzero last XID or a throttling reason.

dcgm-exporter writes `ERROR - FAILED TO CONVERT TO STRING` as the value of fields it cannot read (a real scrape
in tests/metrics/data shows it); prometheus-client's parser rejects the whole text for one such line, so sample
lines whose value is not a number are dropped first.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from pdctl.metrics import names as N
from pdctl.metrics.scrape import Scrape, parse

# NVML's clocks event reasons (nvmlClocksEventReason*): the bits that slow a busy GPU down. Idle (0x1), the
# application clocks setting (0x2) and the display clock (0x100) are not throttling.
THROTTLE_BITS = {0x4: "sw power cap", 0x8: "hw slowdown", 0x10: "sync boost", 0x20: "sw thermal slowdown",
                 0x40: "hw thermal slowdown", 0x80: "hw power brake"}
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$|^[+-]?(Inf|NaN)$", re.IGNORECASE)


@dataclass
class Device:
    """One GPU or MIG instance: what its fields said (None: not exported / not supported)."""

    gpu: str
    instance: str | None = None  # MIG GPU instance id
    model: str | None = None
    util_pct: float | None = None
    engine_active: float | None = None  # 0..1
    tensor_active: float | None = None  # 0..1
    memory_used_mib: float | None = None
    memory_total_mib: float | None = None
    pcie_bytes_s: float | None = None  # tx + rx
    nvlink_bytes_s: float | None = None  # tx + rx
    last_xid: int | None = None
    throttle: list[str] = field(default_factory=list)
    # the default counters' cumulative totals (NVLink: its bandwidth counter over all lanes; PCIe: KB, as
    # default-counters.csv declares them), turned into bytes/s against the previous scrape (with_rates)
    counters: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"GPU {self.gpu}" + (f" MIG {self.instance}" if self.instance is not None else "")


def clean_exposition(text: str) -> str:
    """TEXT without the sample lines whose value is not a number (dcgm-exporter's conversion errors)."""
    out = []
    for line in text.splitlines():
        if line and not line.startswith("#"):
            value = line.rsplit("}", 1)[-1].split()
            if not value or not _NUMBER.match(value[0]):
                continue
        out.append(line)
    return "\n".join(out) + "\n"


def _devices(scrape: Scrape) -> dict[tuple[str, str | None], Device]:
    devices: dict[tuple[str, str | None], Device] = {}
    for name, series in scrape.samples.items():
        if not name.startswith("DCGM_FI_"):
            continue
        for labels, _ in series:
            key = (labels.get("gpu", "?"), labels.get("GPU_I_ID"))
            devices.setdefault(key, Device(key[0], key[1], labels.get("modelName")))
    return devices


def _field(scrape: Scrape, name: str) -> dict[tuple[str, str | None], float]:
    """Device key -> value of field NAME over every label set (the larger of two series of one device)."""
    out: dict[tuple[str, str | None], float] = {}
    for labels, value in scrape.series(name):
        key = (labels.get("gpu", "?"), labels.get("GPU_I_ID"))
        out[key] = max(out.get(key, value), value)
    return out


def _pair(a: float | None, b: float | None) -> float | None:
    return None if a is None and b is None else (a or 0.0) + (b or 0.0)


def from_dcgm(text: str, at: float = 0.0) -> list[Device]:
    """The devices of a dcgm-exporter scrape (ValueError when it is not Prometheus text at all)."""
    scrape = parse(clean_exposition(text), at)
    devices = _devices(scrape)
    fields = {name: _field(scrape, name) for name in (
        N.DCGM_GPU_UTIL, N.DCGM_GR_ACTIVE, N.DCGM_TENSOR_ACTIVE, N.DCGM_FB_USED, N.DCGM_FB_FREE, N.DCGM_XID,
        N.DCGM_PCIE_TX_BYTES, N.DCGM_PCIE_RX_BYTES, N.DCGM_NVLINK_TX_BYTES, N.DCGM_NVLINK_RX_BYTES,
        *N.DCGM_CLOCK_REASONS)}
    fields_c = {name: _field(scrape, name) for name in COUNTERS}
    for key, d in devices.items():
        d.util_pct = fields[N.DCGM_GPU_UTIL].get(key)
        d.engine_active = fields[N.DCGM_GR_ACTIVE].get(key)
        d.tensor_active = fields[N.DCGM_TENSOR_ACTIVE].get(key)
        used, free = fields[N.DCGM_FB_USED].get(key), fields[N.DCGM_FB_FREE].get(key)
        d.memory_used_mib = used
        d.memory_total_mib = None if used is None or free is None else used + free
        d.pcie_bytes_s = _pair(fields[N.DCGM_PCIE_TX_BYTES].get(key), fields[N.DCGM_PCIE_RX_BYTES].get(key))
        d.nvlink_bytes_s = _pair(fields[N.DCGM_NVLINK_TX_BYTES].get(key), fields[N.DCGM_NVLINK_RX_BYTES].get(key))
        xid = fields[N.DCGM_XID].get(key)
        d.last_xid = None if xid is None else int(xid)
        mask = next((int(f[key]) for f in (fields[n] for n in N.DCGM_CLOCK_REASONS) if key in f), 0)
        d.throttle = [why for bit, why in THROTTLE_BITS.items() if mask & bit]
        d.counters = {name: fields_c[name][key] for name in COUNTERS if key in fields_c[name]}
    return [devices[k] for k in sorted(devices, key=lambda k: (_index(k[0]), _index(k[1] or "-1")))]


COUNTERS = (N.DCGM_NVLINK_TOTAL, N.DCGM_PCIE_TX_KB, N.DCGM_PCIE_RX_KB)


def with_rates(devices: list[Device], prev: list[Device] | None, seconds: float) -> list[Device]:
    """DEVICES with NVLink and PCIe bytes/s from the default counters' growth since PREV (SECONDS earlier),
    where the profiling fields gave none; a counter that went down (exporter restart) gives no rate."""
    before = {(d.gpu, d.instance): d.counters for d in prev or []}
    if seconds <= 0:
        return devices
    for d in devices:
        old = before.get((d.gpu, d.instance), {})
        if d.nvlink_bytes_s is None:
            d.nvlink_bytes_s = _rate(d.counters, old, N.DCGM_NVLINK_TOTAL, 1.0, seconds)
        if d.pcie_bytes_s is None:
            d.pcie_bytes_s = _pair(_rate(d.counters, old, N.DCGM_PCIE_TX_KB, 1024.0, seconds),
                                   _rate(d.counters, old, N.DCGM_PCIE_RX_KB, 1024.0, seconds))
    return devices


def _rate(now: dict[str, float], old: dict[str, float], name: str, scale: float, seconds: float) -> float | None:
    if name not in now or name not in old or now[name] < old[name]:
        return None
    return (now[name] - old[name]) * scale / seconds


def _index(text: str) -> int:
    return int(text) if text.lstrip("-").isdigit() else 1 << 30


def from_nvidia_smi(inv: Any) -> list[Device]:
    """The devices of a parsed `nvidia-smi -q` (INV: pdctl.preflight.parsers.nvidia_smi's GpuInventory, the one
    parser of that text, handed in by the launch layer above both): whole GPUs (nvidia-smi
    reports no utilisation for a MIG-enabled GPU: None then). No tensor activity or traffic: DCGM's fields."""
    return [Device(str(i), None, g.name, util_pct=g.utilization_pct, memory_used_mib=g.memory_used_mib,
                   memory_total_mib=g.memory_mib, throttle=list(g.throttle)) for i, g in enumerate(inv.gpus)]


def _mean(values: list[float]) -> float | None:
    return round(sum(values) / len(values), 4) if values else None


def summary(devices: list[Device]) -> dict[str, Any]:
    """The node's figures over every device: counts, activity mean/max, memory and traffic sums, XIDs, throttling."""

    def known(attr: str) -> list[float]:
        return [v for d in devices if (v := getattr(d, attr)) is not None]

    util, engine, tensor = known("util_pct"), known("engine_active"), known("tensor_active")
    used, total = known("memory_used_mib"), known("memory_total_mib")
    pcie, nvlink = known("pcie_bytes_s"), known("nvlink_bytes_s")
    return {
        "devices": len(devices), "mig_instances": sum(1 for d in devices if d.instance is not None),
        "util_pct_mean": _mean(util), "util_pct_max": max(util) if util else None,
        "engine_active_mean": _mean(engine), "tensor_active_mean": _mean(tensor),
        "memory_used_mib": sum(used) if used else None, "memory_total_mib": sum(total) if total else None,
        "pcie_bytes_s": sum(pcie) if pcie else None, "nvlink_bytes_s": sum(nvlink) if nvlink else None,
        "xid": {d.name: d.last_xid for d in devices if d.last_xid},
        "throttled": {d.name: d.throttle for d in devices if d.throttle},
    }


def node_document(source: str | None, devices: list[Device], why: str | None = None) -> dict[str, Any]:
    """One node's telemetry as `status --json` carries it (source None: no GPUs seen, WHY says why)."""
    return {"source": source, "why": why, "summary": summary(devices) if devices else None,
            "devices": [asdict(d) | {"name": d.name} for d in devices]}
