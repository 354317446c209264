"""render(topo) -> Deployment: every process of a topology, placed once, for the engine the topology names and
the executor kind that starts it."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pdctl.render.cpu import numerics_notes
from pdctl.render.kinds import engine_python, own_python, wrap
from pdctl.render.reference import render_reference_replica
from pdctl.render.router import render_router
from pdctl.render.sglang import model_path, render_sglang_replica
from pdctl.render.spec import Deployment, ProcessSpec
from pdctl.render.transfer import transfer_env, use_nvlink
from pdctl.topology.placement import place

if TYPE_CHECKING:
    from pdctl.topology import Topology

MULTI_NODE_NOTE = "multi-node replicas: start every node rank; only node rank 0 serves HTTP"


def render(topo: Topology, *, executor: str = "local", startup_timeout_s: int = 600) -> Deployment:
    """The deployment of TOPO: placement, then per replica per node the exact argv + env, then the router,
    each wrapped the way EXECUTOR (a kind of pdctl.render.kinds) starts it; every port from the topology or
    its documented derivation (two renders are identical). `transfer.nvlink: auto` renders as if the nodes
    shared no NVLink domain: pdctl.render.transfer.with_nvlink adjusts it from preflight's finding."""
    placements = place(topo)
    own = {n.name: own_python(topo, n, executor) for n in topo.nodes}  # one node, one interpreter
    engine = {n.name: engine_python(topo, n, executor) for n in topo.nodes}
    workers: list[ProcessSpec] = []
    for placement in placements:
        role = topo.role(placement.role)
        if topo.engine.kind == "reference":
            workers += render_reference_replica(topo, role, placement, python=own[placement.slots[0].node])
        else:
            workers += render_sglang_replica(topo, role, placement, engine)
    router = render_router(topo, placements, python=own[topo.router_node.name],
                           startup_timeout_s=startup_timeout_s)
    nvlink, note = use_nvlink(topo, None)
    roles = {w.role for w in workers}
    transfer = {role: transfer_env(topo, nvlink, role) for role in sorted(roles)}
    # a value the user set in engine.env wins over what the transfer path adds
    workers = [replace(w, env={**transfer[w.role], **w.env}) for w in workers]
    notes = ([note] if note else []) + ([MULTI_NODE_NOTE] if any(p.nnodes > 1 for p in placements) else [])
    notes += numerics_notes(topo)  # gpt-oss on a CPU node: the numerics are not gpt-oss's
    return Deployment(
        topo=topo,
        executor=executor,
        placements=placements,
        workers=[wrap(topo, w, executor) for w in workers],
        router=wrap(topo, router, executor),
        model_path=model_path(topo),
        pythons=engine,
        transfer_env=transfer,
        nvlink=nvlink,
        notes=notes,
    )
