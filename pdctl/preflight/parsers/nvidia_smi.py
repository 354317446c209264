"""`nvidia-smi -q` text -> GPU inventory: driver/CUDA versions, each GPU's product name, UUID and fabric
(multi-node NVLink) state, and what `pdctl status` shows of it (utilisation, memory used, active clock event
reasons that slow the GPU down, MIG mode).

The fabric block (`Fabric: State / Status / CliqueId / ClusterUUID`) is how NVL72 racks say which GPUs share
an NVLink domain: same ClusterUUID and CliqueId, state Completed and status Success. An H100 HGX board reports
state Completed with an all-zero ClusterUUID (a real capture in tests/preflight/data shows it): that is no
multi-node domain, and treating equal zero UUIDs as "one domain" is the classic bug this parser avoids.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ZERO_UUID = "00000000-0000-0000-0000-000000000000"
# Product-name fragments -> topology gpu kinds, most specific first ("GB300" before "B300", "H200" before "H100").
GPU_KINDS: tuple[tuple[str, str], ...] = (
    ("GB300", "gb300"), ("B300", "gb300"), ("GB200", "gb200"), ("B200", "b200"),
    ("H200", "h200"), ("GH200", "h200"), ("H100", "h100"), ("H800", "h100"),
)
_LINE = re.compile(r"^(?P<indent>\s*)(?P<key>[^:]+?)\s*(?::\s*(?P<value>.*))?$")
_GPU_HEADER = re.compile(r"^GPU\s+(?P<bus>[0-9A-Fa-f]+:[0-9A-Fa-f]+:[0-9A-Fa-f]+\.[0-9A-Fa-f]+)\s*$")


@dataclass(frozen=True)
class Fabric:
    """One GPU's fabric registration (None fields: nvidia-smi printed N/A or nothing)."""

    state: str | None
    status: str | None
    clique_id: str | None
    cluster_uuid: str | None

    @property
    def domain(self) -> tuple[str, str] | None:
        """(ClusterUUID, CliqueId) if this GPU is registered in a multi-node NVLink domain, else None."""
        if (self.state or "").lower() != "completed" or (self.status or "").lower() != "success":
            return None
        if not self.cluster_uuid or self.cluster_uuid == ZERO_UUID or self.clique_id is None:
            return None
        return self.cluster_uuid, self.clique_id


@dataclass(frozen=True)
class Gpu:
    """One GPU as `nvidia-smi -q` describes it."""

    bus_id: str
    name: str
    uuid: str | None
    memory_mib: int | None
    fabric: Fabric | None
    utilization_pct: float | None = None  # N/A on a MIG-enabled GPU
    memory_used_mib: int | None = None
    throttle: tuple[str, ...] = ()  # active clock event reasons that slow a busy GPU (not Idle, not app clocks)
    mig: bool = False

    @property
    def kind(self) -> str:
        """The topology's gpu kind (gb300, h100, ...), or 'other' for a GPU pdctl has no rules for."""
        upper = self.name.upper()
        for fragment, kind in GPU_KINDS:
            if fragment in upper:
                return kind
        return "other"


@dataclass(frozen=True)
class GpuInventory:
    """What one node's `nvidia-smi -q` says."""

    driver_version: str | None
    cuda_version: str | None
    gpus: list[Gpu] = field(default_factory=list)

    @property
    def kinds(self) -> list[str]:
        """The distinct gpu kinds, in GPU order."""
        return list(dict.fromkeys(g.kind for g in self.gpus))

    @property
    def domains(self) -> set[tuple[str, str]]:
        """The multi-node NVLink domains this node's GPUs are registered in (empty: none)."""
        return {g.fabric.domain for g in self.gpus if g.fabric is not None and g.fabric.domain is not None}


def _value(raw: str | None) -> str | None:
    value = (raw or "").strip()
    return None if value in ("", "N/A", "Not Supported", "[N/A]") else value


def _mib(value: str | None) -> int | None:
    match = re.match(r"(\d+)\s*MiB", value or "")
    return int(match.group(1)) if match else None


def _pct(value: str | None) -> float | None:
    match = re.match(r"(\d+(?:\.\d+)?)\s*%", value or "")
    return float(match.group(1)) if match else None


# The clock event reasons that slow a busy GPU down (`Clocks Event Reasons`, `Clocks Throttle Reasons` before
# driver 535); Idle, Applications Clocks Setting and Display Clock Setting are not throttling.
THROTTLE_KEYS = ("sw power cap", "hw slowdown", "hw thermal slowdown", "hw power brake slowdown",
                 "sync boost", "sw thermal slowdown")


def _throttle(values: dict[str, str | None]) -> tuple[str, ...]:
    found = []
    for section in ("clocks event reasons", "clocks throttle reasons"):
        for path, value in values.items():
            if path.startswith(section + ".") and (value or "").lower() == "active":
                reason = path.rsplit(".", 1)[-1]
                if reason in THROTTLE_KEYS and reason not in found:
                    found.append(reason)
    return tuple(found)


def parse_nvidia_smi_q(text: str) -> GpuInventory:
    """Parse `nvidia-smi -q` (also `-a`). Lines are `<indent>Key : value`; sections are keys without a
    value; a GPU starts at a top-level `GPU <bus id>` line."""
    driver = cuda = None
    gpus: list[Gpu] = []
    current: dict[str, str | None] | None = None
    section: list[tuple[int, str]] = []  # (indent, name) of the open sections inside the current GPU

    def flush() -> None:
        if current is None:
            return
        fabric = None
        if any(k.startswith("fabric.") for k in current):
            fabric = Fabric(current.get("fabric.state"), current.get("fabric.status"),
                            current.get("fabric.cliqueid"), current.get("fabric.clusteruuid"))
        gpus.append(Gpu(
            bus_id=str(current["bus"]), name=current.get("product name") or "unknown",
            uuid=current.get("gpu uuid"), memory_mib=_mib(current.get("fb memory usage.total")), fabric=fabric,
            utilization_pct=_pct(current.get("utilization.gpu")), memory_used_mib=_mib(current.get("fb memory usage.used")),
            throttle=_throttle(current), mig=(current.get("mig mode.current") or "").lower() == "enabled",
        ))

    for line in text.splitlines():
        if not line.strip() or line.lstrip().startswith("="):
            continue
        header = _GPU_HEADER.match(line)
        if header is not None:  # (a bus id holds colons: it is not a `Key : value` line)
            flush()
            current, section = {"bus": header.group("bus")}, []
            continue
        match = _LINE.match(line)
        if match is None:
            continue
        indent, key, value = len(match.group("indent")), match.group("key").strip(), match.group("value")
        if indent == 0:
            if key == "Driver Version":
                driver = _value(value)
            elif key == "CUDA Version":
                cuda = _value(value)
            continue
        if current is None:
            continue
        while section and section[-1][0] >= indent:
            section.pop()
        if value is None:
            section.append((indent, key.lower()))
            continue
        path = ".".join([s for _, s in section] + [key.lower()])
        current[path] = _value(value)
    flush()
    return GpuInventory(driver_version=driver, cuda_version=cuda, gpus=gpus)
