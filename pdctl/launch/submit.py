"""`pdctl launch --executor slurm --submit`: sbatch the plan's script, then wait like a local launch.

The job's script orders the start (workers, /health, router); pdctl then follows from outside with the
same health checks and failure reporting as a local launch, and cancels the job if it does not come up.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pdctl.launch.executors.slurm import SCRIPT_NAME, job_records, render_sbatch, submit
from pdctl.launch.health import worker_health
from pdctl.launch.plan import LaunchPlan
from pdctl.launch.shutdown import stop_records
from pdctl.launch.state import make_run_dir
from pdctl.launch.supervisor import Launch, Progress, _quiet
from pdctl.runs import remember_latest


def write_script(plan: LaunchPlan, run_dir: Path, timeout: float) -> Path:
    """Write <run_dir>/launch.sbatch; returns the script path."""
    make_run_dir(run_dir)
    script = run_dir / SCRIPT_NAME
    script.write_text(render_sbatch(plan, run_dir, timeout_s=int(timeout)), encoding="utf-8")
    return script


def submit_plan(
    plan: LaunchPlan,
    run_dir: Path,
    *,
    timeout: float,
    wait: bool = True,
    progress: Progress | None = None,
    topology_path: Path | None = None,
) -> dict[str, Any]:
    """sbatch the plan; with WAIT, return the state once the router routes to every worker (else
    scancel and CheckFailed naming the process, with its log tail). TOPOLOGY_PATH is recorded in the
    run dir as a local launch records it."""
    launch = Launch.begin(plan, run_dir, progress or _quiet, topology_path)
    script = write_script(plan, run_dir, timeout)
    job_id = submit(script)
    records = job_records(plan, run_dir, job_id)
    launch.state.doc.update({"executor": "slurm", "job_id": job_id, "script": str(script)})
    for record in records:
        launch.state.add(record)
    remember_latest(run_dir)
    launch.state.set_status("submitted")
    if not wait:
        return launch.state.document()
    started = time.monotonic()
    deadline = started + timeout
    workers = [r for r in records if r["role"] != "router"]
    try:
        launch.wait_healthy(workers, deadline, started, worker_health)
        launch.wait_router(records[-1], workers, deadline, started)
    except BaseException:
        stop_records(records)
        launch.state.set_status("failed")
        raise
    launch.state.set_status("running")
    return launch.state.document()
