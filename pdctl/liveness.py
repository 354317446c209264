"""Is a launched deployment alive, and if not, which process died? The one check eval, parity and bench serve
make (before their first request, and again when requests start failing at the connection level or with a
503), so that a dead worker is named with its log tail at once instead of minutes of retries that quote the
router's circuit breaker ("No available prefill workers") about the wrong role.

Why the processes and not the router: the router keeps listing a killed worker as healthy until its own
health checks catch up, and its errors name whichever side it failed to pick. The run's state.json says
what was started; each record's executor (local, ssh, srun) says whether that process still runs.

It sits just under the deployment-target resolver (pdctl.target.resolve asks it for a run dir's target) and
above the executors and run records it reads; `pdctl runs` asks it too (pdctl.launch.runlist).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed
from pdctl.executors import executor_for
from pdctl.runs import read_state
from pdctl.runs.state import all_records

LOG_TAIL_LINES = 20
RECHECK_S = 2.0  # during a run: at most one look at the processes per this many seconds


@dataclass(frozen=True)
class DeadProcess:
    """A process of the run that is no longer running."""

    name: str
    role: str
    replica: int
    node: str
    pid: int | None
    exit_code: int | None  # None: gone, code unknown
    log: str | None
    tail: str

    def describe(self) -> str:
        """'decode:0 (decode-0, node local, pid 1234) exited with code -9'."""
        who = self.role if self.role == "router" else f"{self.role}:{self.replica}"
        how = "exited" if self.exit_code in (None, -1) else f"exited with code {self.exit_code}"
        return f"{who} ({self.name}, node {self.node}, pid {self.pid}) {how}"


@dataclass
class Liveness:
    """The verdict over one run: every started process with whether it still runs."""

    run_dir: Path
    dead: list[DeadProcess] = field(default_factory=list)
    checked: int = 0

    @property
    def ok(self) -> bool:
        return not self.dead

    def summary(self) -> str:
        return "; ".join(d.describe() for d in self.dead)

    def error(self, doing: str) -> CheckFailed:
        """CheckFailed (exit 1) naming every dead process, with their log tails as the detail."""
        tails = "\n".join(f"--- last lines of {d.log} ---\n{d.tail or '(empty)'}" for d in self.dead)
        return CheckFailed(f"{doing}: the deployment of run {self.run_dir} has a dead process: {self.summary()}; "
                           f"`pdctl status --run-dir {self.run_dir}` shows the rest, `pdctl down` and launch again",
                           detail=tails)


def check_run(run_dir: str | Path) -> Liveness:
    """Look at every started process of the run in RUN_DIR (workers and router) through its executor."""
    path = Path(run_dir)
    state = read_state(path)
    verdict = Liveness(path.resolve())
    for record in all_records(state):
        verdict.checked += 1
        try:
            code = executor_for(record).exit_code(record)
        except Exception:  # noqa: BLE001, S112 -- an unreadable process (ssh down) is not a verdict of death
            continue
        if code is None:
            continue
        verdict.dead.append(DeadProcess(
            name=str(record.get("name")), role=str(record.get("role")), replica=int(record.get("replica") or 0),
            node=str(record.get("node")), pid=record.get("pid"), exit_code=code, log=record.get("log"),
            tail=_tail(record)))
    return verdict


def _tail(record: dict[str, Any]) -> str:
    try:
        return executor_for(record).read_log(record, LOG_TAIL_LINES) or ""
    except Exception as exc:  # noqa: BLE001 -- a log we cannot read must not hide who died
        return f"(could not read the log: {exc})"


def require_alive(run_dir: str | Path | None, doing: str) -> None:
    """Before starting DOING against a run: CheckFailed (exit 1) naming the dead processes, if any."""
    if run_dir is None:
        return
    verdict = check_run(run_dir)
    if not verdict.ok:
        raise verdict.error(doing)


class Watchdog:
    """For a command in progress against a run: `dead()` looks at the processes when requests fail, at most
    once per RECHECK_S (however many requests fail at once), from any thread; the first death seen sticks."""

    def __init__(self, run_dir: str | Path | None, *, recheck_s: float = RECHECK_S) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.recheck_s = recheck_s
        self._lock = threading.Lock()
        self._last = -float("inf")
        self.found: Liveness | None = None

    def dead(self) -> Liveness | None:
        """The run's verdict if a process is dead (looked at now, or at most RECHECK_S ago), else None."""
        if self.run_dir is None:
            return None
        with self._lock:
            if self.found is not None:
                return self.found
            now = time.monotonic()
            if now - self._last < self.recheck_s:
                return None
            self._last = now
            verdict = check_run(self.run_dir)
            if not verdict.ok:
                self.found = verdict
            return self.found
