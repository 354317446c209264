"""Slurm executors: short commands on a Slurm node (srun), and processes started as srun steps.

`SlurmExecutor(node=...)` runs preflight's probes, transfer peers and the version question on a Slurm node
through `srun` (a step of the current allocation, or its own small one outside a job), in the topology's
container and after its setup lines. `SrunExecutor` controls the processes a launch started as srun steps
(pdctl launch --in-allocation, which the sbatch job runs): each is an `srun` client process on the machine
that launched it, so there it is stopped and watched like a local process (srun forwards SIGTERM to its
task); from any other machine it is controlled through Slurm — a job pdctl submitted for the deployment is
cancelled whole, a step in someone's own allocation (salloc) is cancelled by its step name.
"""

from __future__ import annotations

import os
import shutil
import socket
import time
from typing import TYPE_CHECKING, Any

from pdctl.errors import UserError
from pdctl.executors import slurm_jobs as jobs
from pdctl.executors.local import LocalExecutor
from pdctl.render.slurm import OWN_JOB_ENV, slurm_target, step_prefix
from pdctl.render.spec import ProcessSpec

if TYPE_CHECKING:
    from pdctl.executors.base import Wrap
    from pdctl.topology import Node, Topology

CANCEL_WAIT_S = 30.0  # after scancel: slurmd signals, waits KillWait, then kills the steps


def node_step(topo: Topology | None, node: Node, name: str = "pdctl-run") -> Wrap:
    """The srun prefix of a short command on NODE (pdctl.render.slurm), for an executor's run/popen."""
    def wrap(interactive: bool) -> list[str]:
        if topo is None:
            return ["srun", "--nodes=1", "--ntasks=1", f"--nodelist={slurm_target(node)}", "--quiet"]
        return step_prefix(topo, node, name=name)

    return wrap


class SlurmExecutor(LocalExecutor):
    """Short commands and conversations on one Slurm node through srun (run/popen); it starts no servers
    (a launch starts those as srun steps: SrunExecutor)."""

    kind = "slurm"

    def __init__(self, node: str | None = None, wrap: Wrap | None = None) -> None:
        if wrap is None:
            raise UserError("running a command through Slurm needs a node")
        if shutil.which("srun") is None:
            raise UserError("the slurm executor needs Slurm's srun on PATH (not found)")
        super().__init__(wrap=wrap)
        self.node = node

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        raise UserError("processes on Slurm nodes are started as srun steps (launch --in-allocation)")


def _step_name(proc: ProcessSpec) -> str | None:
    return next((w.split("=", 1)[1] for w in proc.wrap if w.startswith("--job-name=")), None)


class SrunExecutor(LocalExecutor):
    """Processes started as srun steps from this machine (see the module docstring)."""

    kind = "srun"

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        if shutil.which("srun") is None:
            raise UserError("starting processes on Slurm nodes needs Slurm's srun on PATH (not found)")
        record = super().start(proc, log)
        record.update({
            "executor": self.kind,
            "job_id": os.environ.get("SLURM_JOB_ID"),
            "step": _step_name(proc),
            "launcher": socket.gethostname(),
            "job_owned": os.environ.get(OWN_JOB_ENV) == "1",
        })
        return record

    @staticmethod
    def _local(record: dict[str, Any]) -> bool:
        """Whether the record's srun client is this machine's to watch and signal."""
        return record.get("launcher") == socket.gethostname()

    @staticmethod
    def _by_job(record: dict[str, Any]) -> bool:
        """Stop by cancelling the whole job: a job pdctl submitted for this deployment, from anywhere but the
        job itself (the launch inside it stops its srun clients, then ends, and the job with it)."""
        inside = os.environ.get("SLURM_JOB_ID") == str(record.get("job_id"))
        return bool(record.get("job_owned")) and not (inside and SrunExecutor._local(record))

    def _job_active(self, record: dict[str, Any]) -> bool:
        return record.get("job_id") is not None and jobs.is_active(jobs.job_state(str(record["job_id"])))

    def exit_code(self, record: dict[str, Any]) -> int | None:
        if self._local(record):
            return super().exit_code(record)
        return None if self._job_active(record) else -1

    def group_alive(self, record: dict[str, Any]) -> bool:
        if self._local(record):
            return super().group_alive(record)
        return self._job_active(record)

    def signal_group(self, record: dict[str, Any], sig: int) -> None:
        if self._local(record) and not self._by_job(record):
            super().signal_group(record, sig)
        elif self._job_active(record):
            self._cancel(record)

    def _cancel(self, record: dict[str, Any]) -> str:
        job = str(record["job_id"])
        if self._by_job(record):
            return jobs.cancel(job)
        return jobs.cancel_steps(job, str(record.get("step")))

    def stop(self, record: dict[str, Any], grace_s: float) -> str:
        if not self._by_job(record) and self._local(record):
            return super().stop(record, grace_s)
        if not self._job_active(record):
            return "not running"
        outcome = self._cancel(record)
        if outcome == "not running":
            return outcome
        if outcome != "cancelled":
            return outcome
        deadline = time.monotonic() + max(grace_s, 1.0) + CANCEL_WAIT_S
        job = str(record["job_id"])
        while (jobs.is_active(jobs.job_state(job)) if self._by_job(record)
               else jobs.steps_named(job, str(record.get("step")))):
            if time.monotonic() >= deadline:
                return "still running"
            time.sleep(0.5)
        return "stopped"
