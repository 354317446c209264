"""The environment of the KV transfer path: multi-node NVLink for Mooncake, path reporting for NIXL.

NIXL: UCX_PROTO_INFO=y makes UCX print, in each worker's log, the protocol and the transport/device it
selected per endpoint (e.g. `rc_mlx5/mlx5_0:1`, `tcp/eth1`); `pdctl status` reads it from the prefill logs
(pdctl.preflight.parsers.ucx_proto) to say which path the bytes take. The tables are printed once per
endpoint configuration and operation, so the cost is a few hundred log lines when a prefill server first
connects to a decode server (`pdctl logs` shows them; set UCX_PROTO_INFO=n in engine.env to silence them).

Multi-node NVLink (GB200/GB300 NVL72), what `transfer.nvlink` renders:
Nodes of one NVL72 rack share an NVLink domain (same fabric ClusterUUID and CliqueId), and KV can move over
NVLink between nodes instead of the NIC. Only Mooncake can do that for SGLang's KV pool: SGLang allocates the
pool from NVLink-exportable memory with SGLANG_MOONCAKE_CUSTOM_MEM_POOL=NVLINK and Mooncake's transport must
be forced onto MNNVL (MC_FORCE_MNNVL=True; release wheels build it for arm64 only). NIXL/UCX uses NVLink
across nodes only for fabric-handle memory, which SGLang's KV pool does not allocate, so nothing is rendered
for NIXL. `auto` needs facts from the nodes: preflight decides it (pdctl.preflight.checks_gpu).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pdctl.topology import Topology

# UCX transports of NIXL with `transfer.protocol: tcp`. SGLang: TCP between nodes, CUDA copy/IPC and shared
# memory within one (as the SGLang PR that added head-sliced SWA transfer ran its NIXL tests). The CPU
# reference engine: TCP only, so that a rehearsal moves its KV the way the topology says even between two
# servers on one machine (UCX would take shared memory, cma, there: not what the real run does between nodes).
# A UCX_TLS in engine.env wins over both.
NIXL_TCP_UCX_TLS = "tcp,cuda_copy,cuda_ipc,sm"
REFERENCE_TCP_UCX_TLS = "tcp"
# stderr: unbuffered, so the tables reach the log at once (C stdout to a file is block-buffered).
UCX_PATH_ENV: dict[str, str] = {"UCX_PROTO_INFO": "y", "UCX_LOG_FILE": "stderr"}
# GPU kinds whose nodes can share a multi-node NVLink domain (NVL72 racks); others never do
MNNVL_GPUS = frozenset({"gb200", "gb300"})
MOONCAKE_MNNVL_ENV: dict[str, str] = {"SGLANG_MOONCAKE_CUSTOM_MEM_POOL": "NVLINK", "MC_FORCE_MNNVL": "True"}


def use_nvlink(topo: Topology, shared_domain: bool | None) -> tuple[bool, str | None]:
    """(render the MNNVL environment?, a note saying why) for TOPO; SHARED_DOMAIN is preflight's finding
    (every prefill and decode node in one NVLink domain), None when no preflight ran."""
    mode = topo.transfer.nvlink
    if mode == "off" or not topo.is_pd:
        return False, None
    if topo.transfer.backend != "mooncake":
        if mode == "on":
            return False, ("transfer.nvlink: on has no effect with NIXL: UCX uses NVLink across nodes only for "
                           "fabric-handle memory, which SGLang's KV pool does not allocate (use mooncake)")
        return False, None
    if mode == "on":
        return True, "transfer.nvlink: on: Mooncake over multi-node NVLink (" + _env_text() + ")"
    if not any(n.gpu in MNNVL_GPUS for n in topo.nodes):  # H100/H200/B200 boards: no NVLink across nodes
        return False, None
    if shared_domain is None:
        return False, "transfer.nvlink: auto without preflight: NVLink domain unknown, KV goes over the NIC"
    if shared_domain:
        return True, "transfer.nvlink: auto: nodes share an NVLink domain: " + _env_text()
    return False, None


def protocol_env(topo: Topology) -> dict[str, str]:
    """The environment that holds NIXL to `transfer.protocol: tcp` (UCX_TLS); nothing for rdma (UCX picks) or
    Mooncake (its protocol is a flag or MOONCAKE_PROTOCOL). Callers let engine.env win over it."""
    if not topo.is_pd or topo.transfer.backend != "nixl" or topo.transfer.protocol != "tcp":
        return {}
    return {"UCX_TLS": REFERENCE_TCP_UCX_TLS if topo.engine.kind == "reference" else NIXL_TCP_UCX_TLS}


def transfer_env(topo: Topology, nvlink: bool, role: str) -> dict[str, str]:
    """The environment added to a ROLE worker: UCX path reporting for NIXL on prefill (the side that writes
    KV, whose log `pdctl status` reads), MNNVL for Mooncake on prefill and decode when NVLINK (use_nvlink)."""
    if not topo.is_pd or role not in ("prefill", "decode"):
        return {}
    if topo.transfer.backend == "nixl":
        return dict(UCX_PATH_ENV) if role == "prefill" else {}
    return dict(MOONCAKE_MNNVL_ENV) if nvlink else {}


def _env_text() -> str:
    return " ".join(f"{k}={v}" for k, v in MOONCAKE_MNNVL_ENV.items())
