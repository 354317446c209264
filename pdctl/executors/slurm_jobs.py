"""Slurm's client commands as pdctl uses them: sbatch a script, ask a job's (or its steps') state, scancel.

Each is one short subprocess with a timeout; a missing command is a clear UserError (or a said reason) rather
than a traceback, because pdctl also runs where Slurm is not installed (rendering a script to read).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pdctl.errors import CheckFailed, UserError

# sbatch refusals pdctl's own directives can cause, and what to do (Slurm < 23.11 has no --segment)
SBATCH_HINTS = {"--segment": "this Slurm has no --segment (Slurm >= 23.11 with topology/block has): set "
                             "slurm.segment: false in the cluster profile or the topology"}
# a job's end states that are Slurm's verdict on it (not pdctl's `down`, which cancels: CANCELLED is not one; nor
# COMPLETED): what diagnose reports from Slurm's records (sacct/scontrol)
FAILED_ENDS = ("FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "BOOT_FAIL", "DEADLINE")
_FIELD = re.compile(r"(\w+)=(\S*)")
ACTIVE = ("PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING")


def _run(argv: list[str], timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=False, capture_output=True, text=True, timeout=timeout)


def submit(script: Path) -> str:
    """`sbatch --parsable SCRIPT` -> the job id."""
    if shutil.which("sbatch") is None:
        raise UserError("a Slurm launch submits its job with sbatch, which is not on PATH; the script is at "
                        f"{script} (`pdctl launch --dry-run` prints it without submitting)")
    done = _run(["sbatch", "--parsable", str(script)])
    if done.returncode != 0:
        hints = [f"fix: {hint}" for option, hint in SBATCH_HINTS.items() if option in done.stderr]
        raise CheckFailed(f"sbatch {script} failed (exit {done.returncode})",
                          detail="\n".join([done.stderr.strip(), *hints]))
    return done.stdout.strip().split(";")[0]


def job_state(job_id: str) -> str | None:
    """The job's state (PENDING, RUNNING, ...), or None once squeue no longer knows it."""
    if shutil.which("squeue") is None:
        return None
    done = _run(["squeue", "-h", "-j", job_id, "-o", "%T"], timeout=30)
    return done.stdout.strip() or None


def job_reason(job_id: str) -> str:
    """Why a job waits (squeue's %r: Resources, Priority, ...), '' if squeue does not say."""
    if shutil.which("squeue") is None:
        return ""
    return _run(["squeue", "-h", "-j", job_id, "-o", "%r"], timeout=30).stdout.strip()


def is_active(state: str | None) -> bool:
    return state in ACTIVE


def cancel(job_id: str) -> str:
    """scancel the job; 'cancelled', or why not."""
    if shutil.which("scancel") is None:
        return "scancel not found"
    done = _run(["scancel", job_id])
    return "cancelled" if done.returncode == 0 else f"scancel failed: {done.stderr.strip()}"


def steps_named(job_id: str, name: str) -> list[str]:
    """Ids (JOB.STEP) of the job's running steps called NAME (srun --job-name)."""
    if shutil.which("squeue") is None:
        return []
    done = _run(["squeue", "-h", "-s", "-j", job_id, "-o", "%i %j"], timeout=30)
    out = []
    for line in done.stdout.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[1].strip() == name:
            out.append(parts[0])
    return out


def cancel_steps(job_id: str, name: str) -> str:
    """scancel the job's steps called NAME (the job itself goes on); 'cancelled', 'not running', or why not."""
    steps = steps_named(job_id, name)
    if not steps:
        return "not running"
    if shutil.which("scancel") is None:
        return "scancel not found"
    done = _run(["scancel", *steps])
    return "cancelled" if done.returncode == 0 else f"scancel failed: {done.stderr.strip()}"


@dataclass(frozen=True)
class JobEnd:
    """What Slurm records of a job: its state (TIMEOUT, NODE_FAIL, ...), the reason and the exit code (N:SIG)."""

    job_id: str
    state: str
    reason: str = ""
    exit_code: str = ""

    def line(self) -> str:
        """One line for diagnose: 'slurm job 12: TIMEOUT (reason TimeLimit, exit code 0:15)'."""
        extra = [f"reason {self.reason}"] if self.reason and self.reason != "None" else []
        extra += [f"exit code {self.exit_code}"] if self.exit_code else []
        return f"slurm job {self.job_id}: {self.state}" + (f" ({', '.join(extra)})" if extra else "")


def parse_scontrol(job_id: str, text: str) -> JobEnd | None:
    """`scontrol show job -o ID`'s line as a JobEnd (None without a JobState)."""
    fields = dict(_FIELD.findall(text))
    if not fields.get("JobState"):
        return None
    return JobEnd(job_id, fields["JobState"], fields.get("Reason", ""), fields.get("ExitCode", ""))


def parse_sacct(job_id: str, text: str) -> JobEnd | None:
    """`sacct -X -n -P -o State,ExitCode,Reason`'s first row as a JobEnd ("CANCELLED by 0" -> CANCELLED)."""
    rows = [line.split("|") for line in text.splitlines() if line.strip()]
    if not rows or not rows[0][0].strip():
        return None
    state, code, reason = (rows[0] + ["", "", ""])[:3]
    return JobEnd(job_id, state.split()[0], reason, code)


def job_end(job_id: str) -> JobEnd | None:
    """Slurm's record of the job: slurmctld's (scontrol show job, kept MinJobAge after the end), else the
    accounting database's (sacct, where the cluster keeps one); None when neither knows it."""
    if shutil.which("scontrol") is not None:
        done = _run(["scontrol", "show", "job", "-o", job_id], timeout=30)
        found = parse_scontrol(job_id, done.stdout) if done.returncode == 0 else None
        if found is not None:
            return found
    if shutil.which("sacct") is not None:
        done = _run(["sacct", "-j", job_id, "-X", "-n", "-P", "-o", "State,ExitCode,Reason"], timeout=30)
        return parse_sacct(job_id, done.stdout) if done.returncode == 0 else None
    return None
