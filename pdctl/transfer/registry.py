"""The KV transfer backends pdctl drives, in one table: adding a backend is one entry here and its module.

Every other part of pdctl reads a backend from this table instead of naming it: the topology's
`transfer.backend` values, the reference engine's and bench-transfer's choices, check-compat's known
backends, the extra that installs a library and the native modules that make a process end through
pdctl.procexit, SGLang's spelling of a backend over TCP, the environment the transfer path adds to the
servers (path reporting, multi-node NVLink), and what preflight probes on the nodes (the wheels whose versions
must agree, UCX's transports, which log says the path the bytes took). SGLang keeps the same kind of table
(one `TransferBackend` enum and `get_kv_class`).

Light on purpose (no numpy, no library): the topology's schema imports it; a backend's implementation module
is imported by name only when an endpoint is created (pdctl.transfer.backends.factory).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from pdctl.errors import UserError

# UCX prints, per endpoint, the protocol and transport/device it chose (stderr: unbuffered, so the tables reach
# the log at once); `pdctl status` and preflight read the path from it (pdctl.preflight.parsers.ucx_proto).
UCX_PATH_ENV: dict[str, str] = {"UCX_PROTO_INFO": "y", "UCX_LOG_FILE": "stderr"}
# SGLang allocates the KV pool from NVLink-exportable memory and Mooncake is forced onto multi-node NVLink.
MOONCAKE_MNNVL_ENV: dict[str, str] = {"SGLANG_MOONCAKE_CUSTOM_MEM_POOL": "NVLINK", "MC_FORCE_MNNVL": "True"}


@dataclass(frozen=True)
class Backend:
    """Everything pdctl knows about one KV transfer backend."""

    name: str  # transfer.backend; SGLang's and the reference engine's --disaggregation-transfer-backend
    title: str  # how messages name it
    implementation: str  # "module:Class" of its pdctl.transfer.backends.base.TransferBackend
    extra: str  # the pdctl extra that installs its library
    native_modules: tuple[str, ...]  # its library's modules (native destructors: end through pdctl.procexit)
    distributions: tuple[str, ...]  # the wheels a node may have it from (preflight reads the first installed)
    sglang_tcp_name: str | None = None  # SGLang's own name for it over TCP (it then forces TCP itself)
    protocol_env: str | None = None  # the variable the reference engine reads its protocol (rdma | tcp) from
    ucx: bool = False  # runs over UCX: UCX_TLS says the protocol, preflight checks UCX's transports
    path_log: str = ""  # the log format that says which path the bytes took (preflight.transfer.PATH_READERS)
    path_env: Mapping[str, str] = field(default_factory=dict)  # on prefill: its log then says the path
    nvlink_env: Mapping[str, str] = field(default_factory=dict)  # multi-node NVLink; empty: none across nodes
    no_nvlink: str = ""  # why it cannot move KV over multi-node NVLink (when nvlink_env is empty)

    def sglang_name(self, protocol: str) -> str:
        """What SGLang's --disaggregation-transfer-backend says for this backend over PROTOCOL."""
        return self.sglang_tcp_name if protocol == "tcp" and self.sglang_tcp_name else self.name


NIXL = Backend(
    name="nixl", title="NIXL", implementation="pdctl.transfer.backends.nixl:NixlBackend", extra="engine",
    native_modules=("nixl_cu12", "nixl"), distributions=("nixl", "nixl-cu12", "nixl-cu13"), ucx=True,
    path_log="ucx", path_env=UCX_PATH_ENV,
    no_nvlink="UCX uses NVLink across nodes only for fabric-handle memory, which SGLang's KV pool does not allocate",
)
MOONCAKE = Backend(
    name="mooncake", title="Mooncake", implementation="pdctl.transfer.backends.mooncake:MooncakeBackend",
    extra="engine", native_modules=("mooncake",),
    distributions=("mooncake-transfer-engine", "mooncake-transfer-engine-non-cuda"), sglang_tcp_name="mooncake_tcp",
    protocol_env="MOONCAKE_PROTOCOL", path_log="mooncake", nvlink_env=MOONCAKE_MNNVL_ENV,
)

BACKENDS: dict[str, Backend] = {b.name: b for b in (NIXL, MOONCAKE)}
NAMES: tuple[str, ...] = tuple(BACKENDS)
NATIVE_MODULES: tuple[str, ...] = tuple(m for b in BACKENDS.values() for m in b.native_modules)
NVLINK_CAPABLE: tuple[str, ...] = tuple(b.name for b in BACKENDS.values() if b.nvlink_env)
DEFAULT = NIXL.name  # transfer.backend when the topology says none (SGLang's launcher defaults to mooncake)


def backend(name: str) -> Backend:
    """The entry of backend NAME; UserError naming the known ones otherwise."""
    found = BACKENDS.get(name)
    if found is None:
        raise UserError(f"unknown transfer backend {name!r}: expected one of {', '.join(NAMES)}")
    return found


def from_sglang(name: str) -> tuple[str, str | None]:
    """(backend, the protocol its name forces or None) for SGLang's --disaggregation-transfer-backend NAME
    (mooncake_tcp is Mooncake over TCP); a name pdctl does not know is returned as it is."""
    for entry in BACKENDS.values():
        if name == entry.sglang_tcp_name:
            return entry.name, "tcp"
    return name, None
