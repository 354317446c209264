"""`pdctl launch --submit`: write the sbatch script, sbatch it, and follow the job from outside until the
deployment it launches is ready.

The job runs `pdctl launch --in-allocation` (pdctl.launch.deploy; its script: pdctl.render.sbatch), which
writes the run dir's state.json as any launch does; this side relays the job's output (so preflight's lines and any error appear
here as they happen), waits while the job is queued (the `--timeout` clock starts when it runs), and once
the job's launch says `running`, checks from here that the router routes to every worker. If the job ends, its
launch fails, the timeout passes or the user presses Ctrl-C, the job is cancelled and the error carries the
tail of the job's output.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl.errors import CheckFailed, UserError
from pdctl.executors import slurm_jobs as jobs
from pdctl.launch.health import router_ready
from pdctl.launch.supervisor import Launch, Progress, _quiet
from pdctl.render.jobpython import Submitter
from pdctl.render.sbatch import SCRIPT_NAME, render_sbatch
from pdctl.runs import remember_latest
from pdctl.runs.state import TOPOLOGY_COPY, current_state, write_topology_copy

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology

POLL_S = 1.0
OUTPUT_TAIL_LINES = 40


def pdctl_command(run_dir: Path, *, timeout: float, skip_compat: bool, skip_preflight: bool) -> list[str]:
    """The launch the job runs, after the interpreter (pdctl.render.jobpython picks it on the node): pdctl on
    the run dir's copy of the topology, which has the cluster profile applied already (--cluster none)."""
    run_dir = run_dir.resolve()
    argv = ["-m", "pdctl", "launch", str(run_dir / TOPOLOGY_COPY), "--in-allocation", "--cluster", "none",
            "--run-dir", str(run_dir), "--timeout", f"{timeout:g}"]
    if skip_compat:
        argv.append("--skip-compat")
    if skip_preflight:
        argv.append("--skip-preflight")
    return argv


def sbatch_script(topo: Topology, run_dir: Path, *, timeout: float, skip_compat: bool = False,
                  skip_preflight: bool = False, submitter: Submitter | None = None) -> str:
    """The sbatch script of TOPO's job in RUN_DIR, as --submit submits it (and --dry-run prints it)."""
    if topo.source_path is None:
        raise UserError("a Slurm job launches its topology from a file: load the topology from one")
    command = pdctl_command(run_dir, timeout=timeout, skip_compat=skip_compat, skip_preflight=skip_preflight)
    return render_sbatch(topo, run_dir, command, submitter or Submitter.here())


def write_script(topo: Topology, run_dir: Path, *, timeout: float, skip_compat: bool = False,
                 skip_preflight: bool = False, submitter: Submitter | None = None) -> Path:
    """<run_dir>/launch.sbatch, and the copy of the topology it launches (<run_dir>/topology.yaml, with the
    --set overrides applied)."""
    text = sbatch_script(topo, run_dir, timeout=timeout, skip_compat=skip_compat, skip_preflight=skip_preflight,
                         submitter=submitter)
    write_topology_copy(topo, run_dir)
    script = run_dir / SCRIPT_NAME
    script.write_text(text, encoding="utf-8")
    return script


class JobOutput:
    """The job's output file (slurm-<job>.out in the run dir), read as it grows."""

    def __init__(self, run_dir: Path, job_id: str) -> None:
        self.path = run_dir.resolve() / f"slurm-{job_id}.out"
        self.offset = 0
        self.partial = ""

    def new_lines(self) -> list[str]:
        try:
            with open(self.path, "rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return []
        self.offset += len(chunk)
        text = self.partial + chunk.decode("utf-8", "replace")
        lines = text.split("\n")
        self.partial = lines.pop()
        return lines

    def tail(self, lines: int = OUTPUT_TAIL_LINES) -> str:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return f"(no job output at {self.path})"
        return f"--- last {lines} lines of {self.path} ---\n" + "\n".join(text.splitlines()[-lines:])


def submit_topology(
    deployment: Deployment,
    run_dir: Path,
    *,
    timeout: float,
    skip_compat: bool = False,
    skip_preflight: bool = False,
    wait: bool = True,
    progress: Progress | None = None,
    say: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """sbatch the job of DEPLOYMENT's topology (DEPLOYMENT is what a dry run shows: written to plan.json until
    the job writes its own); with WAIT, follow it until its deployment is ready (SAY gets each line the job
    prints) and return the state document; on any failure the job is cancelled and CheckFailed carries its
    output's tail."""
    progress = progress or _quiet
    topo = deployment.topo
    launch = Launch.begin(deployment, run_dir, progress)
    script = write_script(topo, run_dir, timeout=timeout, skip_compat=skip_compat, skip_preflight=skip_preflight)
    job_id = jobs.submit(script)
    launch.state.doc.update({"executor": "slurm", "job_id": job_id, "job_owned": True, "script": str(script)})
    launch.state.set_status("submitted")
    remember_latest(run_dir)
    if not wait:
        return launch.state.document()
    output = JobOutput(run_dir, job_id)
    try:
        return _follow(job_id, run_dir, timeout, output, progress, say or (lambda _line: None))
    except BaseException:
        jobs.cancel(job_id)
        for line in output.new_lines():
            (say or (lambda _line: None))(line)
        raise


def _follow(job_id: str, run_dir: Path, timeout: float, output: JobOutput, progress: Progress,
            say: Callable[[str], None]) -> dict[str, Any]:
    """Wait for the job's launch to say `running`, then for the router from here."""
    name = f"job {job_id}"
    deadline: float | None = None
    started = time.monotonic()
    while True:
        for line in output.new_lines():
            say(line)
        state = jobs.job_state(job_id)
        doc = current_state(run_dir)
        status = doc.get("status")
        if status == "running" and doc.get("job_id") == job_id:
            break
        if status in ("failed", "stopped") and doc.get("job_id") == job_id:
            raise CheckFailed(f"the launch in slurm job {job_id} {status}", detail=output.tail())
        if not jobs.is_active(state):
            unseen = "" if output.path.exists() else (
                "\nits output never appeared here: the run dir is likely not on a filesystem the job's nodes "
                "share with this machine (pass --run-dir on a shared filesystem)")
            raise CheckFailed(f"slurm job {job_id} ended ({state or 'gone'}) before its deployment was ready",
                              detail=output.tail() + unseen)
        if state == "PENDING":
            progress(name, "waiting", f"queued: {jobs.job_reason(job_id) or 'pending'}")
        else:
            if deadline is None:
                started = time.monotonic()
                deadline = started + timeout
            progress(name, "waiting", f"{state.lower() if state else '?'}: {status or 'starting'} "
                     f"({time.monotonic() - started:.0f}s)")
            if time.monotonic() >= deadline:
                raise CheckFailed(f"the deployment of slurm job {job_id} was not ready within {timeout:.0f}s",
                                  detail=output.tail())
        time.sleep(POLL_S)
    router = doc.get("router") or {}
    expected = sum(1 for r in doc.get("processes", []) if r.get("url"))
    end = (deadline or time.monotonic() + timeout)
    while True:
        ok, what = router_ready(router.get("url", ""), expected)
        if ok:
            break
        if time.monotonic() >= end:
            raise CheckFailed(f"slurm job {job_id} is running, but its router {router.get('url')} does not answer "
                              f"from this machine ({what})", detail=output.tail())
        time.sleep(POLL_S)
    progress(name, "healthy", f"{time.monotonic() - started:.0f}s")
    return current_state(run_dir)
