"""One command on one Slurm node: the `srun` prefix every process, probe and transfer peer pdctl runs on a
Slurm node is put behind, and the job's resource options (shared by the #SBATCH lines and an srun that has to
make its own allocation).

A step is one task on one named node. Inside an allocation (salloc, the sbatch job) every step is started
with `--overlap`, so the servers, the router and preflight's probes share the job's CPUs, memory and GPUs
instead of queueing for them (srtctl starts its workers the same way). engine.container adds pyxis's options
and the container's environment; slurm.setup lines (module load, source a venv) run in a `bash -c` before the
command is exec'ed, inside the container when there is one, so they shape exactly what the engine sees.
"""

from __future__ import annotations

import ipaddress
import os
from typing import TYPE_CHECKING

from pdctl.errors import UserError
from pdctl.render.container import pyxis_options

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology

# set in a job pdctl submitted: the allocation exists for this deployment, so stopping it (pdctl down) cancels
# the job (pdctl.executors.slurm)
OWN_JOB_ENV = "PDCTL_OWN_JOB"
STEP_SCRIPT_NAME = "pdctl-step"  # $0 of the setup script (what `ps` shows)


def in_allocation() -> bool:
    """True inside a Slurm job (an salloc shell, an sbatch script, a step): srun then makes steps of it."""
    return bool(os.environ.get("SLURM_JOB_ID"))


def gpu_option(topo: Topology) -> str | None:
    """--gres (slurm.gres) or --gpus-per-node: slurm.gpus_per_node, else the nodes' `gpus` when every node is a
    GPU node with one count (a cluster hands out GPUs only when asked); None for 0 or CPU nodes."""
    slurm = topo.slurm
    if slurm is not None and slurm.gres:
        return f"--gres={slurm.gres}"
    count = slurm.gpus_per_node if slurm is not None else None
    if count is None:
        kinds = {(n.gpu, n.gpus) for n in topo.nodes}
        count = next(iter(kinds))[1] if len(kinds) == 1 and next(iter(kinds))[0] != "cpu" else 0
    return f"--gpus-per-node={count}" if count else None


def job_options(topo: Topology, *, exclusive: bool = True) -> list[str]:
    """The job's resource options in Slurm's spelling: partition, account, qos, time, reservation, constraint,
    GPUs, exclusive (EXCLUSIVE=False for a probe's own small allocation, which must not wait for whole nodes)."""
    slurm = topo.slurm
    out: list[str] = []
    if slurm is not None:
        for flag, value in (("partition", slurm.partition), ("account", slurm.account), ("qos", slurm.qos),
                            ("time", slurm.time_limit), ("reservation", slurm.reservation),
                            ("constraint", slurm.constraint)):
            if value:
                out.append(f"--{flag}={value}")
    gpus = gpu_option(topo)
    if gpus:
        out.append(gpus)
    if exclusive and (slurm is None or slurm.exclusive):
        out.append("--exclusive")
    return out


# Multi-node NVLink racks (NVL72: 18 trays of 4 GPUs in one NVLink domain): a job spread over them should ask
# Slurm for one topology segment (#SBATCH --segment, Slurm's topology/block plugin), as srtctl does.
NVL72_GPUS = ("gb200", "gb300")
NVL72_NODES = 18


def segment_option(topo: Topology, count: int) -> str | None:
    """`--segment=N` of the job of COUNT nodes: slurm.segment true = COUNT, an int = that, false = none;
    unset = COUNT when the nodes are GB200/GB300 or transfer.nvlink is on and COUNT fits one NVL72 domain."""
    choice = topo.slurm.segment if topo.slurm is not None else None
    if choice is False or count < 1:
        return None
    if choice is None:
        nvlink = topo.is_pd and topo.transfer.nvlink == "on"
        if not (nvlink or any(n.gpu in NVL72_GPUS for n in topo.nodes)) or count > NVL72_NODES:
            return None
        choice = True
    return f"--segment={count if choice is True else choice}"


def slurm_target(node: Node) -> str:
    """The Slurm node name of NODE (its host); an IP address is refused: srun --nodelist takes node names."""
    target = node.target
    try:
        ipaddress.ip_address(target.strip("[]"))
    except ValueError:
        return target
    raise UserError(
        f"node {node.name}: host {target} is an address, but Slurm places steps on node names: write the Slurm "
        "node name as host (and the address as advertise_host), or leave host out to take the job's nodes")


def step_prefix(topo: Topology, node: Node, *, name: str, inside: bool | None = None) -> list[str]:
    """`srun ... [pyxis options] [env C=V] [bash -c SETUP]`: what runs a command (with its own `env K=V`) as
    one task on NODE. INSIDE: in an allocation (default: whether this process is in one)."""
    inside = in_allocation() if inside is None else inside
    argv = ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={slurm_target(node)}", f"--job-name={name}", "--quiet"]
    argv += ["--overlap"] if inside else job_options(topo, exclusive=False)
    if topo.slurm is not None:
        argv += topo.slurm.srun_options
    argv += pyxis_options(topo)
    container = topo.engine.container
    if container is not None and container.env:
        argv += ["env", *(f"{k}={v}" for k, v in container.env.items())]
    setup = topo.slurm.setup if topo.slurm is not None else []
    if setup:
        argv += ["bash", "-c", "\n".join(["set -e", *setup, 'exec "$@"']), STEP_SCRIPT_NAME]
    return argv


def step_name(topo: Topology, process: str) -> str:
    """The step's --job-name (what squeue -s shows, and how pdctl finds a step to cancel)."""
    return f"pdctl-{topo.name}-{process}"
