"""render(topo) -> LaunchPlan: every command of a deployment, for the engine the topology names."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from pdctl.launch.plan import LaunchPlan, ProcessSpec
from pdctl.launch.render_reference import render_reference_replica
from pdctl.launch.render_router import render_router
from pdctl.launch.render_sglang import render_sglang_replica
from pdctl.launch.render_transfer import transfer_env, use_nvlink
from pdctl.topology.placement import place

if TYPE_CHECKING:
    from pdctl.topology import Topology


def render(
    topo: Topology,
    *,
    startup_timeout_s: int = 600,
    nvlink_domain: bool | None = None,
    slurm: bool = False,
    wrap: bool = True,
) -> LaunchPlan:
    """The launch plan of TOPO: per replica per node the exact argv + env, then the router; every port from
    the topology or its documented derivation (two renders are identical).
    NVLINK_DOMAIN: preflight's finding that prefill and decode nodes share an NVLink domain (None: unknown),
    which decides `transfer.nvlink: auto`. SLURM: every process is an srun step on its node (in the
    topology's container, after its setup lines); otherwise engine.container puts it behind `docker run`.
    WRAP=False: the commands alone (what check-compat judges)."""
    placements = place(topo)
    workers: list[ProcessSpec] = []
    for placement in placements:
        role = topo.role(placement.role)
        if topo.engine.kind == "reference":
            workers += render_reference_replica(topo, role, placement, slurm=slurm)
        else:
            workers += render_sglang_replica(topo, role, placement)
    router = render_router(topo, placements, startup_timeout_s=startup_timeout_s, slurm=slurm)
    notes = []
    nvlink, note = use_nvlink(topo, nvlink_domain)
    if note:
        notes.append(note)
    # a value the user set in engine.env wins over what the transfer path adds
    workers = [replace(w, env={**transfer_env(topo, nvlink, w.role), **w.env}) for w in workers]
    if any(p.nnodes > 1 for p in placements):
        notes.append("multi-node replicas: start every node rank; only node rank 0 serves HTTP")
    if wrap:
        workers = [wrap_process(topo, w, slurm=slurm) for w in workers]
        router = wrap_process(topo, router, slurm=slurm)
    return LaunchPlan(
        topology=topo.name,
        engine=topo.engine.kind,
        workers=workers,
        router=router,
        router_url=router.url or "",
        notes=notes,
    )


def wrap_process(topo: Topology, proc: ProcessSpec, *, slurm: bool) -> ProcessSpec:
    """PROC as it is started: an srun step on its node (SLURM), or in `docker run` (engine.container), or as
    it is."""
    node = topo.node(proc.node)
    if slurm:
        from pdctl.launch.slurm.step import step_name, step_prefix

        return replace(proc, wrap=step_prefix(topo, node, name=step_name(topo, proc.name), inside=True),
                       executor="srun")
    if topo.engine.container is not None:
        from pdctl.launch.container import container_name, docker_prefix

        name = container_name(topo, proc.name)
        return replace(proc, wrap=docker_prefix(topo, node, name=name), container=name)
    return proc
