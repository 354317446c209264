"""A Slurm run's job itself, as a record diagnose reads beside its processes: the job's output (slurm-<job>.out in
the run dir, where the batch step's slurmstepd writes "*** JOB ... CANCELLED AT ... DUE TO TIME LIMIT ***", pyxis
its import errors, and pdctl's launch inside the job its own messages) and Slurm's record of how the job ended
(scontrol / sacct: TIMEOUT, OUT_OF_MEMORY, NODE_FAIL, ...).

`job_records(state, run_dir)` gives that record for a run whose state.json names a job (a submitted job, or the
allocation a `--in-allocation` launch ran in: without an output file of pdctl's); `SlurmJobExecutor` reads it
and, asked to stop it, cancels the job.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.executors import slurm_jobs as jobs
from pdctl.executors.local import LocalExecutor
from pdctl.executors.logtail import tail_lines
from pdctl.render.spec import ProcessSpec

JOB_ROLE = "job"
# what the job's own output holds that is its own: Slurm's and pyxis's words (the launch in it also prints the
# processes' log tails, whose failures are their processes' findings, not the job's)
JOB_LOG_COMPONENTS = ("Slurm", "pyxis/enroot")


def job_records(state: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    """The record of the job STATE names ([] for none): its output file when pdctl submitted it."""
    job_id = state.get("job_id")
    if not job_id:
        return []
    nodes = state.get("nodes") or {}
    first = next(iter(nodes), "-")
    output = run_dir / f"slurm-{job_id}.out" if state.get("job_owned") else None
    return [{"name": f"slurm-job-{job_id}", "role": JOB_ROLE, "replica": 0, "node": first, "executor": "slurm",
             "job_id": str(job_id), "log": str(output) if output else None, "log_components": list(JOB_LOG_COMPONENTS)}]


class SlurmJobExecutor(LocalExecutor):
    """A job's record (job_records): its output read as a log, Slurm's record of its end, cancelled as a whole."""

    kind = "slurm"

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        raise UserError("a Slurm job is submitted (pdctl launch --submit), not started as a process")

    def _active(self, record: dict[str, Any]) -> bool:
        return jobs.is_active(jobs.job_state(str(record["job_id"])))

    def exit_code(self, record: dict[str, Any]) -> int | None:
        return None if self._active(record) else -1

    def process_state(self, record: dict[str, Any]) -> str | None:
        return None

    def group_alive(self, record: dict[str, Any]) -> bool:
        return self._active(record)

    def signal_group(self, record: dict[str, Any], sig: int) -> None:
        if self._active(record):
            jobs.cancel(str(record["job_id"]))

    def stop(self, record: dict[str, Any], grace_s: float) -> str:
        return jobs.cancel(str(record["job_id"])) if self._active(record) else "not running"

    def read_log(self, record: dict[str, Any], tail: int) -> str:
        return tail_lines(Path(record["log"]), tail) if record.get("log") else ""

    def follow_log(self, record: dict[str, Any], tail: int) -> Iterator[str]:
        if not record.get("log"):
            raise UserError(f"{record['name']}: the job's output is not pdctl's to read (an allocation of your own)")
        return super().follow_log(record, tail)

    def platform_lines(self, record: dict[str, Any]) -> list[str]:
        """Slurm's record of the job's end when it is Slurm's verdict (jobs.FAILED_ENDS); [] while it runs, once
        it completed or was cancelled (what `pdctl down` does), or when Slurm no longer knows it."""
        end = jobs.job_end(str(record["job_id"]))
        return [end.line()] if end is not None and end.state in jobs.FAILED_ENDS else []
