"""Stopping a run: SIGTERM every process group, SIGKILL what is left after a grace period.

Works from state.json alone (idempotent; fine after pdctl itself was killed): groups already gone are
skipped, and a pid now owned by another process is never signalled (see LocalExecutor.group_alive).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pdctl.executors import executor_for
from pdctl.runs import read_state, resolve_run_dir
from pdctl.runs.state import all_records, write_state

GRACE_S = 10.0
DOCKER_RM_TIMEOUT_S = 30.0


def _stop(record: dict[str, Any], grace_s: float) -> str:
    """Stop one record; a docker container (engine.container) is then removed too, in case it outlived its
    `docker run` client (a SIGKILLed client leaves its container running)."""
    executor = executor_for(record)
    outcome = executor.stop(record, grace_s)
    if record.get("container"):
        executor.run(["docker", "rm", "-f", str(record["container"])], timeout=DOCKER_RM_TIMEOUT_S)
    return outcome


def _stop_all(records: list[dict[str, Any]], grace_s: float) -> dict[str, str]:
    """Stop RECORDS concurrently (each remote stop is one ssh round trip plus the grace period)."""
    if not records:
        return {}
    with ThreadPoolExecutor(max_workers=min(16, len(records))) as pool:
        results = list(pool.map(lambda r: _stop(r, grace_s), records))
    return {r["name"]: outcome for r, outcome in zip(records, results)}


def stop_records(records: list[dict[str, Any]], *, grace_s: float = GRACE_S) -> dict[str, str]:
    """Stop the process groups of RECORDS: the router first (it stops sending work), then every worker.

    Returns {process name: "stopped" | "killed" | "not running" | "still running" | "unknown (...)"}."""
    router = [r for r in records if r.get("role") == "router"]
    workers = [r for r in records if r.get("role") != "router"]
    outcome = _stop_all(router, grace_s)
    outcome.update(_stop_all(workers, grace_s))
    return outcome


def teardown(run_dir: str | Path | None = None, *, grace_s: float = GRACE_S) -> dict[str, str]:
    """Stop every process of a run (the latest run if RUN_DIR is None); marks the state `stopped`.

    Slurm steps are stopped through their records (their srun clients, or scancel from another machine).
    Returns what happened to each process."""
    path = resolve_run_dir(run_dir)
    state = read_state(path)
    outcome = stop_records(all_records(state), grace_s=grace_s)
    state["status"] = "stopped"
    write_state(path, state)
    return outcome
