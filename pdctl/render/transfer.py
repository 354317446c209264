"""The environment of the KV transfer path, from each backend's entry in pdctl.transfer.registry: multi-node
NVLink for Mooncake, path reporting for NIXL, UCX's transports for a UCX backend held to `transfer.protocol: tcp`.

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
for NIXL. `auto` needs facts from the nodes: the deployment is rendered without NVLink, and with_nvlink
adjusts its environment once preflight has found the nodes' NVLink domain (pdctl.preflight.checks.gpu).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from pdctl.transfer.registry import NVLINK_CAPABLE, backend

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology

NVLINK_NOTE = "transfer.nvlink:"  # how the notes of use_nvlink begin
# GPU kinds whose nodes can share a multi-node NVLink domain (NVL72 racks); others never do
MNNVL_GPUS = frozenset({"gb200", "gb300"})
# UCX transports of a UCX backend (NIXL) with `transfer.protocol: tcp`. SGLang: TCP between nodes, CUDA copy/IPC
# and shared memory within one (as the SGLang PR that added head-sliced SWA transfer ran its NIXL tests). The
# CPU reference engine and SGLang on CPU nodes: TCP only, so that a rehearsal moves its KV the way the topology says even between two
# servers on one machine (UCX would take shared memory, cma, there: not what the real run does between nodes).
# A UCX_TLS in engine.env wins over both.
NIXL_TCP_UCX_TLS = "tcp,cuda_copy,cuda_ipc,sm"
REFERENCE_TCP_UCX_TLS = "tcp"


def use_nvlink(topo: Topology, shared_domain: bool | None) -> tuple[bool, str | None]:
    """(render the MNNVL environment?, a note saying why) for TOPO; SHARED_DOMAIN is preflight's finding
    (every prefill and decode node in one NVLink domain), None when no preflight ran."""
    mode = topo.transfer.nvlink
    if mode == "off" or not topo.is_pd:
        return False, None
    entry = backend(topo.transfer.backend)
    if not entry.nvlink_env:
        if mode == "on":
            return False, (f"transfer.nvlink: on has no effect with {entry.title}: {entry.no_nvlink} (use "
                           f"{' or '.join(NVLINK_CAPABLE)})")
        return False, None
    if mode == "on":
        return True, f"transfer.nvlink: on: {entry.title} over multi-node NVLink ({_env_text(entry.nvlink_env)})"
    if not any(n.gpu in MNNVL_GPUS for n in topo.nodes):  # H100/H200/B200 boards: no NVLink across nodes
        return False, None
    if shared_domain is None:
        return False, "transfer.nvlink: auto without preflight: NVLink domain unknown, KV goes over the NIC"
    if shared_domain:
        return True, "transfer.nvlink: auto: nodes share an NVLink domain: " + _env_text(entry.nvlink_env)
    return False, None


def protocol_env(topo: Topology) -> dict[str, str]:
    """The environment that holds a UCX backend (NIXL) to `transfer.protocol: tcp` (UCX_TLS); nothing for rdma
    (UCX picks) or a backend whose protocol is a flag or its own variable (Mooncake). Callers let engine.env win
    over it."""
    if not topo.is_pd or not backend(topo.transfer.backend).ucx or topo.transfer.protocol != "tcp":
        return {}
    host_only = topo.engine.kind == "reference" or all(n.gpu == "cpu" for n in topo.nodes)  # no CUDA transports
    return {"UCX_TLS": REFERENCE_TCP_UCX_TLS if host_only else NIXL_TCP_UCX_TLS}


def transfer_env(topo: Topology, nvlink: bool, role: str) -> dict[str, str]:
    """The environment the transfer path adds to a ROLE worker: UCX's transports for `transfer.protocol: tcp`
    (protocol_env), the backend's path reporting on prefill (the side that writes KV, whose log `pdctl status`
    reads; UCX's tables for NIXL), its multi-node NVLink environment on prefill and decode when NVLINK
    (use_nvlink; Mooncake's MNNVL). engine.env wins over all of it (the renderer and preflight's transfer test
    put it last)."""
    if not topo.is_pd or role not in ("prefill", "decode"):
        return {}
    entry = backend(topo.transfer.backend)
    return {**protocol_env(topo), **(entry.path_env if role == "prefill" else {}),
            **(entry.nvlink_env if nvlink else {})}


def with_nvlink(deployment: Deployment, shared_domain: bool | None) -> Deployment:
    """DEPLOYMENT with `transfer.nvlink: auto` decided by preflight's finding SHARED_DOMAIN (every prefill and
    decode node in one NVLink domain): the MNNVL environment added to (or kept from) its workers and the note
    that says why, without rendering anything again. None (no finding) leaves it as rendered."""
    if shared_domain is None:
        return deployment
    topo = deployment.topo
    nvlink, note = use_nvlink(topo, shared_domain)
    transfer = {role: transfer_env(topo, nvlink, role) for role in deployment.transfer_env}
    added = {role: {k: v for k, v in env.items() if k not in deployment.transfer_env[role]}
             for role, env in transfer.items()}
    dropped = {role: set(deployment.transfer_env[role]) - set(env) for role, env in transfer.items()}
    user = {role: topo.env_of(role) for role in deployment.transfer_env}  # the user's env wins, as at render
    workers = []
    for w in deployment.workers:
        env = {k: v for k, v in w.env.items() if k not in dropped[w.role] or k in user[w.role]}
        workers.append(replace(w, env={**added[w.role], **env}))
    notes = [n for n in deployment.notes if not n.startswith(NVLINK_NOTE)] + ([note] if note else [])
    return replace(deployment, workers=workers, transfer_env=transfer, nvlink=nvlink, notes=notes)


def _env_text(env: Mapping[str, str]) -> str:
    return " ".join(f"{k}={v}" for k, v in env.items())
