"""The sbatch script of a topology: its #SBATCH lines, then pdctl itself, run in the job.

The job's work is `pdctl launch --in-allocation` on the job's first node — the same code an salloc user
runs by hand — so the job does what a launch does, in the same order and with the same checks: assign the
job's nodes to the topology's nodes, ask them for their SGLang version, check-compat, preflight on the nodes
themselves, then start every process as an srun step, wait for /health, start the router, and stay until the
job is cancelled (srtctl's job script likewise runs its Python orchestrator on the head node). The script
is a pure function of the topology, the run dir, the options and the submitting pdctl: two renders are
byte-identical. The interpreter running pdctl in the job is chosen on the node by its architecture
(pdctl.render.jobpython): a login host's venv cannot run on compute nodes of another architecture.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import TYPE_CHECKING

from pdctl.render.jobpython import INTERPRETER_VAR, Submitter, interpreter_lines
from pdctl.render.slurm import OWN_JOB_ENV, job_options, segment_option, slurm_target
from pdctl.topology.placement import machine_key

if TYPE_CHECKING:
    from pdctl.topology import Topology

SCRIPT_NAME = "launch.sbatch"


def job_nodes(topo: Topology) -> tuple[int, list[str]]:
    """(how many nodes the job asks for, the Slurm node names it must include): one per distinct named host,
    plus one per node without host."""
    named = [n for n in topo.nodes if not n.allocated]
    hosts = list(dict.fromkeys(slurm_target(n) for n in named))
    machines = {machine_key(n) for n in named}
    return len(machines) + sum(1 for n in topo.nodes if n.allocated), hosts


def _directive(option: str) -> str:
    """One #SBATCH line; a value with blanks is double-quoted (sbatch reads quotes in its directives)."""
    name, sep, value = option.partition("=")
    if sep and any(c.isspace() for c in value) and '"' not in value:
        value = f'"{value}"'
    return f"#SBATCH {name}{sep}{value}"


def directives(topo: Topology, run_dir: Path) -> list[str]:
    """The #SBATCH lines: name, nodes (count, and the names written as hosts), the job's resource options,
    the NVLink segment (segment_option), the output file in the run dir, the working directory, then slurm.sbatch_directives as written."""
    slurm = topo.slurm
    count, hosts = job_nodes(topo)
    options = [f"--job-name={(slurm.job_name if slurm and slurm.job_name else 'pdctl-' + topo.name)}",
               f"--nodes={count}"]
    if hosts:
        options.append(f"--nodelist={','.join(hosts)}")
    options += job_options(topo)
    segment = segment_option(topo, count)
    if segment:
        options.append(segment)
    options += [f"--output={run_dir / 'slurm-%j.out'}", f"--chdir={Path.cwd()}"]
    options += slurm.sbatch_directives if slurm else []
    return [_directive(o) for o in options]


def render_sbatch(topo: Topology, run_dir: Path, args: list[str], submitter: Submitter) -> str:
    """The whole script: its #SBATCH lines, the choice of the interpreter running pdctl on the job's node
    (SUBMITTER: the pdctl that submits), then ARGS, the job's one command after the interpreter (`-m pdctl
    launch --in-allocation` on the run dir's copy of the topology: pdctl.launch.submit.pdctl_command). RUN_DIR
    is made absolute: the job reads and writes it, so it must be on a shared filesystem, as must the
    interpreter running pdctl."""
    run_dir = run_dir.resolve()
    lines = [
        "#!/bin/bash",
        *directives(topo, run_dir),
        f"# rendered by pdctl for topology {topo.name}",
        "# The job runs `pdctl launch --in-allocation` on its first node, which assigns the job's nodes to the",
        '# topology\'s in order (scontrol show hostnames "$SLURM_JOB_NODELIST"), asks them for their SGLang',
        "# version, runs check-compat and preflight on them, then starts every process as an srun step and",
        "# stays until the job is cancelled (pdctl down).",
        "set -euo pipefail",
        f"export {OWN_JOB_ENV}=1",
        *interpreter_lines(topo, submitter),
        f'exec "${INTERPRETER_VAR}" ' + shlex.join(args),
    ]
    return "\n".join(lines) + "\n"
