"""One launch, one way: load -> version -> place + render (once) -> verdicts -> start.

Every launch path runs this sequence, and nothing else renders: `pdctl launch` (a real launch, `--dry-run`,
a Slurm topology's job submitted and followed, `--in-allocation` inside the job) and the Python API
(`launch_topology`, used by parity's reference and bench serve's control). The topology is rendered ONCE into a Deployment
(pdctl.render); check-compat parses that deployment's commands, the local-node checks and preflight read it,
`transfer.nvlink: auto` adjusts its environment from preflight's facts, and the supervisor starts exactly it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed, UserError
from pdctl.executors import node_kind
from pdctl.launch.gate import (
    engine_version,
    gate,
    missing_here,
    preflight_gate,
    require_local_nodes,
    require_runnable_here,
)
from pdctl.launch.kube import MANIFESTS_FILE, checked_manifests, launch_on_kubernetes, write_manifests
from pdctl.launch.lockfile import record_lock
from pdctl.launch.submit import sbatch_script, submit_topology
from pdctl.launch.supervisor import Progress, refuse_running, supervise
from pdctl.preflight.report import PreflightReport
from pdctl.preflight.runner import DEFAULT_DEADLINE_S, DEFAULT_TOKENS, run_preflight
from pdctl.render.deployment import render
from pdctl.render.kinds import AUTO, HERE, JOB, KINDS, OBJECTS, allocation_kind, executor_kind, submit_refusal
from pdctl.render.sbatch import SCRIPT_NAME
from pdctl.render.sharedfs import job_paths, unshared
from pdctl.render.spec import Deployment
from pdctl.runs import default_run_dir
from pdctl.runs.state import dry_run_dir, write_deployment
from pdctl.sglang.versions import VersionChoice
from pdctl.topology import Topology

Say = Callable[[str], None]


@dataclass(frozen=True)
class LaunchOptions:
    """What to do with a topology (`pdctl launch`'s options)."""

    run_dir: Path | None = None  # default: .pdctl/runs/<name>
    executor: str = AUTO  # a kind of pdctl.render.kinds, or auto (slurm: with a slurm: section)
    dry_run: bool = False  # render, judge, write plan.json (Slurm: and the sbatch script); start nothing
    submit: bool = False  # Slurm: sbatch the job and follow it (what a launch of a Slurm topology does anyway)
    in_allocation: bool = False  # inside a Slurm allocation: take its nodes, start srun steps
    timeout: float = 600.0
    skip_compat: bool = False
    preflight: bool = True
    detach: bool = True
    remember: bool = True  # record the run as .pdctl/latest


@dataclass(frozen=True)
class LaunchHooks:
    """What the caller shows while a launch runs (all optional)."""

    loud: Say | None = None  # --skip-compat's notice
    warning: Say | None = None  # what is not checked (--skip-preflight), job paths not on a shared filesystem
    notice: Say | None = None  # each warning check-compat raised, as one compact line
    note: Say | None = None  # the SGLang version's note (assumed, asked)
    progress: Progress | None = None  # per process: starting | waiting | healthy | failed | stopped
    on_ready: Callable[[dict[str, Any]], None] | None = None  # foreground: the deployment is up
    on_preflight: Callable[[PreflightReport], None] | None = None
    preflight_progress: Say | None = None  # preflight's steps: each node probed, each transfer finished
    say: Say | None = None  # a submitted job's output, line by line


@dataclass(frozen=True)
class Launched:
    """What a launch did: `dry-run` (plan.json written; Slurm: the sbatch script too), `submitted` (the job's
    deployment is ready) or `running` (started from here)."""

    outcome: str
    deployment: Deployment
    run_dir: Path
    state: dict[str, Any] | None = None
    script: Path | None = None  # Slurm dry run: the sbatch script --submit would submit, exactly
    plan_file: Path | None = None
    missing: list[UserError] = field(default_factory=list)  # dry run: what could not start from here
    beside: bool = False  # dry run: RUN_DIR holds a run's records, so it wrote beside them (RUN_DIR/dry-run)
    manifests: Path | None = None  # kubernetes: the manifests written (and applied, unless a dry run)


def _check_options(kind: str, options: LaunchOptions) -> None:
    if options.in_allocation and (options.dry_run or options.submit):
        raise UserError("--in-allocation starts the deployment in this allocation: it takes no --dry-run or --submit")
    if options.submit and not KINDS[kind].submits:
        raise UserError(submit_refusal())


def launch(topo: Topology, options: LaunchOptions, hooks: LaunchHooks | None = None) -> Launched:
    """Launch TOPO as OPTIONS say, telling HOOKS what happens; the topology is rendered once."""
    hooks = hooks or LaunchHooks()
    kind = allocation_kind() if options.in_allocation else executor_kind(topo, options.executor)
    _check_options(kind, options)
    run_dir = Path(options.run_dir) if options.run_dir is not None else default_run_dir(topo.name)
    # how it starts: from here (inside an allocation too), as a job (a Slurm topology: sbatch), as objects
    path = HERE if options.in_allocation else KINDS[kind].launch
    job = path == JOB
    # the processes start from here: a real launch, or the one inside a Slurm job
    starting = not options.dry_run and not job
    if starting and not options.preflight and hooks.warning:  # a submitted job says it itself
        hooks.warning("--skip-preflight: the nodes are NOT checked before launch (versions, model, ports, "
                      "transfer path)")
    state: dict[str, Any] = {}
    enter = node_kind(kind).allocation
    if options.in_allocation and enter is not None:
        topo, state = enter(topo, timeout=options.timeout)
    # a job's nodes cannot be asked before the job runs (the job asks them), nor pods before they exist; a dry
    # run asks what it can reach but does not fail on it
    ask = path == HERE
    topo, version = engine_version(topo, ask=ask, strict=starting, executor=kind)
    if version is not None and version.note and hooks.note:
        hooks.note(version.note)
    deployment = render(topo, executor=kind, startup_timeout_s=int(options.timeout))
    # what cannot run as pods at all is bad input (exit 2), said before the verdicts
    manifests = checked_manifests(deployment) if path == OBJECTS else []
    gate(deployment, version, skip_compat=options.skip_compat, warn=hooks.loud, notice=hooks.notice)
    if path == OBJECTS:
        return _kubernetes(deployment, manifests, run_dir, options, hooks, version)
    if options.dry_run:
        return _dry_run(deployment, run_dir, options, hooks, job=job)
    if job:
        _warn_unshared(deployment, run_dir, hooks)
        record_lock(deployment, run_dir, version, None, preflight="in the job (its launch rewrites this lock)")
        done = submit_topology(deployment, run_dir, timeout=options.timeout, skip_compat=options.skip_compat,
                               skip_preflight=not options.preflight, progress=hooks.progress, say=hooks.say)
        return Launched("submitted", deployment, run_dir, state=done)
    require_local_nodes(deployment)  # before preflight: a node without ssh: can only be checked if it is here
    require_runnable_here(deployment)  # a CLI-only install: say which extra, before anything starts
    if options.preflight:
        refuse_running(run_dir)  # a live deployment there would fail preflight's port checks less clearly
        seen: list[PreflightReport] = []

        def on_report(report: PreflightReport) -> None:
            seen.append(report)
            if hooks.on_preflight is not None:
                hooks.on_preflight(report)

        try:
            deployment = preflight_gate(deployment, on_report=on_report, progress=hooks.preflight_progress,
                                        shared_dir=run_dir if options.in_allocation else None)
        except CheckFailed:
            if seen:  # what the nodes said is recorded even when it stops the launch
                record_lock(deployment, run_dir, version, seen[0], preflight="failed")
            raise
        record_lock(deployment, run_dir, version, seen[0] if seen else None, preflight="passed")
    else:
        record_lock(deployment, run_dir, version, None, preflight="skipped (--skip-preflight)")
    done = supervise(deployment, run_dir, timeout=options.timeout, detach=options.detach, progress=hooks.progress,
                     on_ready=hooks.on_ready, remember=options.remember, state=state)
    return Launched("running", deployment, run_dir, state=done)


def _kubernetes(deployment: Deployment, objs: list[dict[str, Any]], run_dir: Path, options: LaunchOptions,
                hooks: LaunchHooks, version: VersionChoice | None) -> Launched:
    """The manifests of DEPLOYMENT written (dry run) or applied and waited for. Preflight probes machines
    pdctl can run commands on; a pod's machine is the scheduler's choice, so it is not run (said)."""
    if options.dry_run:  # beside a run already in RUN_DIR, never over its records
        where = dry_run_dir(run_dir)
        return Launched("dry-run", deployment, run_dir, plan_file=write_deployment(where, deployment),
                        manifests=write_manifests(where, objs), beside=where != run_dir)
    if options.preflight and hooks.warning:
        hooks.warning("kubernetes: preflight is not run (the scheduler chooses the machines; pdctl runs no "
                      "commands on them): the pods' readiness is the check")
    record_lock(deployment, run_dir, version, None, preflight="not run (kubernetes: the scheduler picks the machines)")
    state = launch_on_kubernetes(deployment, objs, run_dir, timeout=options.timeout, progress=hooks.progress or _quiet,
                                 remember=options.remember)
    return Launched("running", deployment, run_dir, state=state, manifests=run_dir / MANIFESTS_FILE)


def _quiet(name: str, phase: str, detail: str) -> None:
    """No progress display."""


def _dry_run(deployment: Deployment, run_dir: Path, options: LaunchOptions, hooks: LaunchHooks, *,
             job: bool) -> Launched:
    """Write the deployment (beside a run already in RUN_DIR, never over its records); a Slurm job's dry run
    also writes the sbatch script --submit would submit, exactly (the script names RUN_DIR itself)."""
    where = dry_run_dir(run_dir)
    plan_file = write_deployment(where, deployment)
    if not job:
        return Launched("dry-run", deployment, run_dir, plan_file=plan_file, missing=missing_here(deployment),
                        beside=where != run_dir)
    script = where / SCRIPT_NAME
    script.write_text(sbatch_script(deployment.topo, run_dir, timeout=options.timeout,
                                    skip_compat=options.skip_compat, skip_preflight=not options.preflight),
                      encoding="utf-8")
    _warn_unshared(deployment, run_dir, hooks)
    return Launched("dry-run", deployment, run_dir, script=script, plan_file=plan_file, beside=where != run_dir)


def _warn_unshared(deployment: Deployment, run_dir: Path, hooks: LaunchHooks) -> None:
    """Warn when paths the Slurm job needs are likely not on a filesystem its nodes share."""
    lines = unshared(job_paths(run_dir, deployment.model_path))
    if lines and hooks.warning:
        hooks.warning("the Slurm job reads and writes these on its nodes, which need them on a filesystem they "
                      "share (preflight in the job fails if a node cannot read the run dir):"
                      + "".join(f"\n  - {line}" for line in lines))


def launch_topology(
    topo: Topology,
    run_dir: str | Path | None = None,
    *,
    timeout: float = 600.0,
    skip_compat: bool = False,
    detach: bool = True,
    progress: Progress | None = None,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    remember: bool = True,
    preflight: bool = False,
    on_preflight: Callable[[PreflightReport], None] | None = None,
    warn: Say | None = None,
) -> dict[str, Any]:
    """The Python API of a launch from this machine (parity's reference, bench serve's control, tests): launch
    TOPO (local and ssh nodes) and return its state document once the router routes to every worker.

    detach=False stays and watches (see pdctl.launch.supervisor.supervise); remember=False leaves
    `.pdctl/latest` alone, for a helper deployment later commands must not pick up; PREFLIGHT checks the nodes
    first (ON_PREFLIGHT gets the report); WARN receives --skip-compat's notice."""
    options = LaunchOptions(run_dir=Path(run_dir) if run_dir is not None else None, executor="local",
                            timeout=timeout, skip_compat=skip_compat, preflight=preflight, detach=detach,
                            remember=remember)
    hooks = LaunchHooks(loud=warn, progress=progress, on_ready=on_ready, on_preflight=on_preflight)
    done = launch(topo, options, hooks)
    assert done.state is not None
    return done.state


def check_nodes(topo: Topology, *, executor: str = AUTO, skip_transfer: bool = False, tokens: int = DEFAULT_TOKENS,
                timeout: float = 60.0, progress: Say | None = None, transfers: str = "cover",
                deadline: float | None = DEFAULT_DEADLINE_S) -> PreflightReport:
    """`pdctl preflight`: TOPO's nodes checked as a launch would reach them (EXECUTOR: a kind, or auto). A
    kind binds its nodes first (a Slurm topology: to the allocation this process runs in);
    then it is rendered once and preflight reads that deployment."""
    kind = executor_kind(topo, executor)
    topo = node_kind(kind).bind(topo)
    return run_preflight(render(topo, executor=kind), skip_transfer=skip_transfer, tokens=tokens, timeout=timeout,
                         progress=progress, transfers=transfers, deadline=deadline)
