"""Reference-engine worker commands: `python -m pdctl.reference ...` with SGLang's flag names.

The reference engine is pdctl's CPU stand-in for SGLang (ENGINE.md); rendering it with the same structure
as SGLang means launch, status, logs and down run the same code for both engines.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pdctl.errors import UserError
from pdctl.launch.plan import ProcessSpec, merge_flags
from pdctl.launch.render_sglang import model_path, process_name

if TYPE_CHECKING:
    from pdctl.topology import Node, RoleConfig, Topology
    from pdctl.topology.placement import ReplicaPlacement

_DEFAULT_PYTHONS = {"python", "python3"}


def reference_python(topo: Topology, node: Node) -> str:
    """The interpreter for the reference engine on NODE. On this machine a bare `python3` would likely be
    a Python without pdctl; the interpreter running pdctl certainly has it, so that one is used."""
    if node.ssh is None and topo.engine.python in _DEFAULT_PYTHONS:
        return sys.executable
    return topo.engine.python


def render_reference_replica(
    topo: Topology, role: RoleConfig, placement: ReplicaPlacement
) -> list[ProcessSpec]:
    """One process per replica: the reference engine runs its tp ranks itself, on one node."""
    if placement.nnodes > 1:
        raise UserError(
            f"{placement.name}: the reference engine runs a replica on one node, but tp {role.tp} x "
            f"pp {role.pp} spans {placement.nnodes} nodes; give a node more rank slots (gpus)"
        )
    if role.pp != 1 or role.dp != 1:
        raise UserError(
            f"{role.name}: the reference engine supports pp 1 and dp 1 only (got pp {role.pp}, dp {role.dp})"
        )
    slot = placement.slots[0]
    node = topo.node(slot.node)
    env = dict(topo.engine.env)
    pd = role.name != "colocated"  # colocated: a plain server, no transfer settings or disaggregation flags
    if pd and topo.transfer.staging_buffer:
        env["SGLANG_DISAGG_STAGING_BUFFER"] = "1"
    if pd and topo.transfer.backend == "mooncake":
        env.setdefault("MOONCAKE_PROTOCOL", "tcp" if topo.transfer.protocol == "tcp" else "rdma")
    argv = [
        reference_python(topo, node),
        "-m",
        "pdctl.reference",
        "--model-path",
        model_path(topo),
        "--role",
        role.name,
        "--tp",
        str(role.tp),
        "--host",
        node.host,
        "--port",
        str(placement.http_port),
        "--page-size",
        str(role.page_size),
        "--kv-cache-dtype",
        role.kv_cache_dtype,
        "--kv-layout",
        role.kv_layout,
    ]
    if not role.hybrid_swa_memory:
        argv.append("--disable-hybrid-swa-memory")
    if pd:
        argv += [
            "--disaggregation-transfer-backend",
            topo.transfer.backend,
            "--disaggregation-bootstrap-port",
            str(placement.bootstrap_port),
        ]
    if role.name == "decode" and role.radix_cache:
        argv.append("--disaggregation-decode-enable-radix-cache")
    for flag, value in (
        ("--max-total-tokens", role.max_total_tokens),
        ("--chunked-prefill-size", role.chunked_prefill_size),
        ("--context-length", role.context_length),
        ("--random-seed", role.random_seed),
    ):
        if value is not None:
            argv += [flag, str(value)]
    argv = merge_flags(argv, role.args)
    ports = [placement.http_port] + ([placement.bootstrap_port] if role.name == "prefill" else [])
    return [
        ProcessSpec(
            name=process_name(role.name, placement.replica),
            role=role.name,
            replica=placement.replica,
            node=node.name,
            host=node.host,
            node_rank=0,
            argv=argv,
            env=env,
            url=placement.url,
            health_path="/health",
            bind_host=node.host,
            ports=ports,
            ssh=node.ssh.model_dump() if node.ssh is not None else None,
        )
    ]
