"""The slurm executor: the whole plan as one sbatch script; each process is an `srun` step on its node.

Slurm owns process lifetime there (scancel stops every step), so this executor works on a whole plan
instead of per process: render the script, `sbatch` it, `scancel` it. The script itself orders the start as
launch does: workers, wait for /health on each, then the router, then wait for its /readiness.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed, UserError
from pdctl.launch.executors import CommandResult
from pdctl.launch.executors.local import LocalExecutor, popen_piped, run_captured
from pdctl.launch.plan import LaunchPlan, ProcessSpec
from pdctl.launch.state import new_record

SCRIPT_NAME = "launch.sbatch"


def _srun(proc: ProcessSpec, log: str) -> str:
    env = [f"{k}={v}" for k, v in proc.env.items()]
    step = [
        "srun",
        "--nodes=1",
        "--ntasks=1",
        f"--nodelist={proc.host}",
        "--overlap",
        f"--job-name={proc.name}",
        f"--output={log}",
        "env",
        *env,
        *proc.argv,
    ]
    return f"# {proc.name} on node {proc.node}\n{shlex.join(step)} &\npids+=($!)\n"


def render_sbatch(plan: LaunchPlan, run_dir: Path, *, timeout_s: int = 600) -> str:
    """The sbatch script of PLAN: one srun step per process, logs in RUN_DIR/logs (a shared filesystem
    path), workers first, the router once every worker answers /health. Node hosts are Slurm node names."""
    run_dir = run_dir.resolve()
    hosts = list(dict.fromkeys(p.host for p in plan.processes()))
    logs = run_dir / "logs"
    out = [
        "#!/bin/bash",
        f"#SBATCH --job-name={shlex.quote('pdctl-' + plan.topology)}",
        f"#SBATCH --nodes={len(hosts)}",
        f"#SBATCH --nodelist={','.join(shlex.quote(h) for h in hosts)}",
        "#SBATCH --exclusive",
        f"#SBATCH --output={shlex.quote(str(run_dir / 'slurm-%j.out'))}",
        "# rendered by pdctl launch --executor slurm; start order as in `pdctl launch`",
        "set -u",
        f"mkdir -p {shlex.quote(str(logs))}",
        "pids=()",
        "trap 'kill \"${pids[@]}\" 2>/dev/null' EXIT",
        f"TIMEOUT={int(timeout_s)}",
        "wait_http() {  # URL: poll until HTTP 200, give up after $TIMEOUT s",
        "  local deadline=$((SECONDS + TIMEOUT))",
        '  until curl -sf -o /dev/null "$1"; do',
        "    if (( SECONDS > deadline )); then",
        '      echo "pdctl: $1 not healthy after ${TIMEOUT}s" >&2; exit 1',
        "    fi",
        "    sleep 2",
        "  done",
        "}",
        "",
    ]
    for proc in plan.workers:
        out.append(_srun(proc, str(logs / f"{proc.name}.log")))
    for proc in plan.workers:
        if proc.url and proc.health_path:
            out.append(f"wait_http {shlex.quote(proc.url + proc.health_path)}")
    out.append("")
    out.append(_srun(plan.router, str(logs / "router.log")))
    out.append(f"wait_http {shlex.quote(plan.router_url + '/readiness')}")
    out.append(f"echo {shlex.quote('pdctl: router ready at ' + plan.router_url)}")
    out.append("wait -n  # the job ends (and scancel-s the rest) when any process exits")
    return "\n".join(out) + "\n"


def submit(script: Path) -> str:
    """`sbatch --parsable SCRIPT` -> the job id."""
    if shutil.which("sbatch") is None:
        raise UserError("--submit needs Slurm's sbatch on PATH (not found); the script is at " + str(script))
    done = subprocess.run(
        ["sbatch", "--parsable", str(script)], check=False, capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        raise CheckFailed(f"sbatch {script} failed (exit {done.returncode})", detail=done.stderr.strip())
    return done.stdout.strip().split(";")[0]


def cancel(job_id: str) -> str:
    """scancel the job; 'cancelled', or why not."""
    if shutil.which("scancel") is None:
        return "scancel not found"
    done = subprocess.run(["scancel", job_id], check=False, capture_output=True, text=True, timeout=60)
    return "cancelled" if done.returncode == 0 else f"scancel failed: {done.stderr.strip()}"


def job_state(job_id: str) -> str | None:
    """The job's Slurm state (RUNNING, PENDING, ...), or None once it is no longer known to squeue."""
    if shutil.which("squeue") is None:
        return None
    done = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], check=False, capture_output=True, text=True, timeout=30
    )
    state = done.stdout.strip()
    return state or None


def srun_argv(node: str, argv: list[str], env: dict[str, str] | None = None) -> list[str]:
    """`srun` running ARGV once on Slurm node NODE (its own small allocation outside a job, a step
    inside one), with ENV added to the environment srun exports."""
    prefix = ["env", *(f"{k}={v}" for k, v in (env or {}).items())] if env else []
    return [
        "srun", "--nodes=1", "--ntasks=1", f"--nodelist={node}", "--quiet", "--job-name=pdctl-run",
        *prefix, *argv,
    ]


class SlurmExecutor:
    """Controls the processes of a submitted job through Slurm (they have no pids pdctl could signal):
    a process counts as running while its job runs; stopping any stops the job. Logs are read from the
    run dir, which Slurm jobs share with the submitting machine. With NODE, `run`/`popen` reach that Slurm
    node through srun (preflight's probes and transfer peers)."""

    kind = "slurm"

    def __init__(self, node: str | None = None) -> None:
        self.node = node

    def _node(self) -> str:
        if not self.node:
            raise UserError("running a command through Slurm needs a node name")
        if shutil.which("srun") is None:
            raise UserError("the slurm executor needs Slurm's srun on PATH (not found)")
        return self.node

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        return run_captured(srun_argv(self._node(), argv, env), timeout=timeout)

    def popen(self, argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return popen_piped(srun_argv(self._node(), argv, env))

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        raise CheckFailed("slurm processes are started by their sbatch script, not one by one")

    def exit_code(self, record: dict[str, Any]) -> int | None:
        return None if job_state(str(record["job_id"])) in ("RUNNING", "PENDING", "CONFIGURING") else -1

    def group_alive(self, record: dict[str, Any]) -> bool:
        return self.exit_code(record) is None

    def signal_group(self, record: dict[str, Any], sig: int) -> None:
        cancel(str(record["job_id"]))

    def stop(self, record: dict[str, Any], grace_s: float) -> str:
        if not self.group_alive(record):
            return "not running"
        outcome = cancel(str(record["job_id"]))
        if outcome != "cancelled":
            return outcome
        deadline = time.monotonic() + max(grace_s, 1.0) + 30  # slurmd signals, then kills, the steps
        while job_state(str(record["job_id"])) not in (None, "CANCELLED", "COMPLETED", "FAILED"):
            if time.monotonic() >= deadline:
                return "still running"
            time.sleep(0.5)
        return "stopped"

    def read_log(self, record: dict[str, Any], tail: int) -> str:
        return LocalExecutor().read_log(record, tail)

    def follow_log(self, record: dict[str, Any], tail: int) -> Iterator[str]:
        return LocalExecutor().follow_log(record, tail)


def job_records(plan: LaunchPlan, run_dir: Path, job_id: str) -> list[dict[str, Any]]:
    """State records of a submitted plan: every process, controlled through the job."""
    return [
        new_record(proc, run_dir) | {"executor": "slurm", "job_id": job_id, "ssh": None}
        for proc in plan.processes()
    ]
