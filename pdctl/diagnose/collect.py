"""Reading a run for diagnose: every started process's log (through its executor, as `pdctl logs` reads it:
local file, ssh, Slurm step, Kubernetes pod) and its end or state, as pdctl status lines (kb_platform.EXIT_LINE
...), so that one matcher reads both; what the platform records of each (Executor.platform_lines: a pod's
reason, a Slurm job's end); and what the run's kind ran besides its processes (pdctl.executors.run_records: a
Slurm run's job, its output and Slurm's record of its end)."""

from __future__ import annotations

import signal
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pdctl.diagnose.explain import Diagnosis, ProcessLog, explain
from pdctl.diagnose.kb_platform import EXIT_LINE, HUNG_LINE, PLATFORM_LINE, STOPPED_LINE
from pdctl.errors import PdctlError
from pdctl.executors import executor_for, run_records
from pdctl.runs import read_state, resolve_run_dir
from pdctl.runs.state import all_records

LOG_LINES = 20000  # lines read from the end of each log (a first failure further back is rare; logs get large)
LIVE = ("starting", "running")  # run states in which a process's end is news (not pdctl stopping it)


def _signal_name(code: int) -> str:
    try:
        return f" ({signal.Signals(-code).name})" if code < 0 else ""
    except ValueError:
        return ""


def platform_lines(record: dict[str, Any]) -> tuple[list[str], str | None]:
    """What RECORD's platform records of its process (a pod's reason, a Slurm job's end) as pdctl status lines,
    and why they could not be read (None when they were)."""
    try:
        return [PLATFORM_LINE.format(line=line) for line in executor_for(record).platform_lines(record)], None
    except Exception as exc:  # noqa: BLE001 -- an unreachable platform (API server, slurmctld) is no verdict
        return [], f"[pdctl] could not read what the platform records of the process: {exc}"


def status_lines(record: dict[str, Any], platform: list[str], *, live: bool,
                 hung_s: float | None = None) -> tuple[list[str], bool]:
    """pdctl's lines about RECORD's process (PLATFORM: what its platform records of it; its exit, stop or hang)
    and whether it failed."""
    ex = executor_for(record)
    lines = list(platform)
    if not live:
        return lines, bool(lines)
    try:
        code = ex.exit_code(record)
        state = ex.process_state(record) if code is None else None
    except Exception:  # noqa: BLE001 -- an unreachable node (ssh down) is no verdict on the process
        return lines, bool(lines)
    if code not in (None, 0, -1):
        lines.append(EXIT_LINE.format(code=code, signal=_signal_name(code)))
    elif code == -1:
        lines.append(EXIT_LINE.format(code="unknown", signal=""))
    if state == "T":
        lines.append(STOPPED_LINE)
    elif hung_s is not None:
        lines.append(HUNG_LINE.format(seconds=hung_s))
    return lines, bool(lines)


def read_process(record: dict[str, Any], *, live: bool, hung_s: float | None = None) -> ProcessLog:
    try:
        text = executor_for(record).read_log(record, LOG_LINES) or ""
    except Exception as exc:  # noqa: BLE001 -- an unreadable log must not hide the others' failures
        text = f"[pdctl] could not read the log: {exc}"
    platform, unread = platform_lines(record)
    if unread is not None:
        text = f"{text}\n{unread}"
    extra, failed = status_lines(record, platform, live=live, hung_s=hung_s)
    components = record.get("log_components")
    return ProcessLog(name=str(record.get("name")), role=str(record.get("role")),
                      replica=int(record.get("replica") or 0), node=str(record.get("node")),
                      lines=text.splitlines(), status=extra, failed=failed,
                      components=tuple(components) if components else None)


def diagnose_run(run_dir: str | Path | None, *, hung: Mapping[str, float] | None = None,
                 live: bool | None = None) -> Diagnosis:
    """The diagnosis of the run in RUN_DIR (None: the latest). HUNG: processes known to hang (name -> seconds
    without an answer, from liveness); LIVE: whether processes' ends are news (default: the run's state is
    starting or running; after `pdctl down` or a failed launch pdctl itself ended them)."""
    path = resolve_run_dir(run_dir)
    state = read_state(path)
    records = all_records(state) + run_records(state, path)
    is_live = state.get("status") in LIVE if live is None else live
    hung = hung or {}
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(records)))) as pool:
        logs = list(pool.map(lambda r: read_process(r, live=is_live, hung_s=hung.get(str(r.get("name")))),
                             records))
    return explain(logs)


def with_diagnosis(error: PdctlError, run_dir: str | Path | None, *, hung: Mapping[str, float] | None = None,
                   live: bool | None = None) -> PdctlError:
    """ERROR with the run's diagnosis at the end of its message and in `error.diagnosis` (the JSON document's
    "diagnosis"): where a command fails because a process of the run died or hung. A diagnosis that cannot be
    made (the run's records unreadable) leaves ERROR as it is: it must never hide the failure itself."""
    try:
        found = diagnose_run(run_dir, hung=hung, live=live)
    except Exception:  # noqa: BLE001 -- the failure being reported matters more than its diagnosis
        return error
    error.message = f"{error.message}\n{found.summary()}"
    error.diagnosis = found.to_json()
    return error
