"""A Slurm run's job as diagnose reads it (pdctl.executors.slurm_job, slurm_jobs' record parsing): pure parts.
The real thing (a real Slurm's job output and scontrol record) is tests/diagnose/test_e2e_slurm.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.executors import executor_for, run_records
from pdctl.executors import slurm_jobs as jobs
from pdctl.executors.slurm_job import SlurmJobExecutor, job_records

# `scontrol show job -o 12` of a job that hit its time limit (Slurm 22.05, shortened)
SCONTROL = ("JobId=12 JobName=pdctl-diagnose UserId=root(0) GroupId=root(0) Priority=1 JobState=TIMEOUT "
            "Reason=TimeLimit Dependency=(null) Requeue=0 Restarts=0 BatchFlag=1 ExitCode=0:15 RunTime=00:01:07 "
            "TimeLimit=00:01:00 NodeList=pd13-1-[a-b] BatchHost=pd13-1-a")


def test_slurms_records_are_read_as_the_state_reason_and_exit_code() -> None:
    assert jobs.parse_scontrol("12", SCONTROL) == jobs.JobEnd("12", "TIMEOUT", "TimeLimit", "0:15")
    assert jobs.parse_scontrol("12", "slurm_load_jobs error: Invalid job id specified") is None
    assert jobs.parse_sacct("12", "CANCELLED by 0|0:15|None\n") == jobs.JobEnd("12", "CANCELLED", "None", "0:15")
    assert jobs.parse_sacct("12", "") is None
    assert jobs.JobEnd("12", "TIMEOUT", "TimeLimit", "0:15").line() == (
        "slurm job 12: TIMEOUT (reason TimeLimit, exit code 0:15)")
    assert jobs.JobEnd("12", "FAILED", "None", "").line() == "slurm job 12: FAILED"


def test_a_run_with_a_job_has_its_record_and_one_without_none(tmp_path: Path) -> None:
    state = {"executor": "slurm", "job_id": "12", "job_owned": True, "nodes": {"pa": {}, "db": {}}}
    (record,) = run_records(state, tmp_path)
    assert record == job_records(state, tmp_path)[0]
    assert (record["name"], record["role"], record["node"]) == ("slurm-job-12", "job", "pa")
    assert record["log"] == str(tmp_path / "slurm-12.out") and record["log_components"] == ["Slurm", "pyxis/enroot"]
    assert isinstance(executor_for(record), SlurmJobExecutor)
    (salloc,) = run_records({**state, "job_owned": False}, tmp_path)  # the user's allocation: no output of pdctl's
    assert salloc["log"] is None and executor_for(salloc).read_log(salloc, 10) == ""
    assert run_records({"executor": "local"}, tmp_path) == []
    assert run_records({"executor": "slurm"}, tmp_path) == []  # a Slurm run never submitted: no job


@pytest.mark.parametrize(("state", "said"), [
    ("TIMEOUT", True), ("NODE_FAIL", True), ("OUT_OF_MEMORY", True), ("FAILED", True), ("PREEMPTED", True),
    ("CANCELLED", False),  # what `pdctl down` does to a job: not a failure
    ("COMPLETED", False), ("RUNNING", False)])
def test_only_slurms_verdicts_are_said(monkeypatch: pytest.MonkeyPatch, state: str, said: bool) -> None:
    monkeypatch.setattr(jobs, "job_end", lambda job_id: jobs.JobEnd(job_id, state, "r", "0:0"))
    lines = SlurmJobExecutor().platform_lines({"job_id": "12"})
    assert lines == ([f"slurm job 12: {state} (reason r, exit code 0:0)"] if said else [])
