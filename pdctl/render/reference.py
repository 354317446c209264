"""Reference-engine worker commands: `python -m pdctl.reference ...` with SGLang's flag names.

The reference engine is pdctl's CPU stand-in for SGLang (ENGINE.md); rendering it with the same structure
as SGLang means launch, status, logs and down run the same code for both engines.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from pdctl.errors import UserError
from pdctl.render.sglang import model_path
from pdctl.render.spec import ProcessSpec, merge_flags, node_ssh, optional_flag, process_name
from pdctl.sglang_stack.launcher import local_python, pythonpath
from pdctl.transfer.registry import PDCTL_STACK, backend, stack

if TYPE_CHECKING:
    from pdctl.topology import RoleConfig, Topology
    from pdctl.topology.placement import ReplicaPlacement


def render_reference_replica(
    topo: Topology, role: RoleConfig, placement: ReplicaPlacement, *, python: str
) -> list[ProcessSpec]:
    """One process per replica: the reference engine runs its tp ranks itself, on one node, with PYTHON (that
    node's interpreter for pdctl's processes under the deployment's executor kind: pdctl.render.kinds.own_python)."""
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
    env = topo.env_of(role.name)
    pd = role.name != "colocated"  # colocated: a plain server, no transfer settings or disaggregation flags
    if pd and topo.transfer.staging_buffer:
        env["SGLANG_DISAGG_STAGING_BUFFER"] = "1"
    protocol_var = backend(topo.transfer.backend).protocol_env  # the engine's backend reads its protocol there
    if pd and protocol_var:
        env.setdefault(protocol_var, "tcp" if topo.transfer.protocol == "tcp" else "rdma")
    transfer_stack = stack(topo.transfer.stack)
    if pd and transfer_stack.sglang_code and python == sys.executable:
        # SGLang's transfer stack needs SGLang's interpreter (its own CUDA/torch pins); this pdctl rides on its
        # PYTHONPATH (docs/sglang-stack.md). Remote nodes and containers: engine.python must be that Python.
        python = local_python()
        env["PYTHONPATH"] = pythonpath(env.get("PYTHONPATH"))
    argv = [
        python,
        "-m",
        "pdctl.reference",
        "--model-path",
        model_path(topo),
        "--role",
        role.name,
        "--tp",
        str(role.tp),
        "--host",
        node.address,
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
        if transfer_stack is not PDCTL_STACK:
            argv += ["--transfer-stack", transfer_stack.name]
    if role.name == "decode" and role.radix_cache:
        argv.append("--disaggregation-decode-enable-radix-cache")
    argv += optional_flag("--max-total-tokens", role.max_total_tokens)
    argv += optional_flag("--chunked-prefill-size", role.chunked_prefill_size)
    argv += optional_flag("--context-length", role.context_length)
    argv += optional_flag("--random-seed", role.random_seed)
    argv = merge_flags(argv, role.args)
    ports = [placement.http_port] + ([placement.bootstrap_port] if role.name == "prefill" else [])
    return [
        ProcessSpec(
            name=process_name(role.name, placement.replica),
            role=role.name,
            replica=placement.replica,
            node=node.name,
            host=node.target,
            node_rank=0,
            argv=argv,
            env=env,
            url=placement.url,
            health_path="/health",
            bind_host=node.address,
            ports=ports,
            ssh=node_ssh(node),
            advertise=node.address,
        )
    ]
