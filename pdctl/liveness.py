"""Is a launched deployment alive, and if not, which process died or hangs? The one check eval, parity and
bench serve make (before their first request, every few seconds while requests are in flight, and when
requests start failing at the connection level or with a 503), so that a dead or hung worker is named with
its log tail at once instead of minutes of retries that quote the router's circuit breaker ("No available
prefill workers") about the wrong role.

Why the processes and not the router: the router keeps listing a killed worker as healthy until its own
health checks catch up, and its errors name whichever side it failed to pick. The run's state.json says
what was started; each record's executor (local, ssh, srun) says whether that process still runs and in
what state (T: stopped by a signal).

Hung: the process runs but its health endpoint (GET url + health_path: /health of a worker, /readiness of
the router) gives no HTTP answer at all within HEALTH_PROBE_S, nor, unless the process is stopped (state T:
hung at once), within the rest of what that endpoint may take (the record's health_timeout_s: SGLang's /health
runs a one-token generate and answers within SGLANG_HEALTH_CHECK_TIMEOUT + 5 s however loaded the machine), and
has given none for HANG_AFTER_S. Any HTTP answer, a 503 too, is a process that answers.

It sits just under the deployment-target resolver (pdctl.target.resolve asks it for a run dir's target) and
above the executors and run records it reads; `pdctl runs` asks it too (pdctl.launch.runlist).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import requests

from pdctl.diagnose.collect import with_diagnosis
from pdctl.errors import CheckFailed
from pdctl.executors import executor_for
from pdctl.render.kinds import process_kind
from pdctl.runs import read_state
from pdctl.runs.state import all_records, answers_within

T = TypeVar("T")

LOG_TAIL_LINES = 20
RECHECK_S = 2.0  # during a run: at most one look at the processes per this many seconds
HEALTH_PROBE_S = 3.0  # a health check that gives no HTTP answer within this is unanswered
HANG_AFTER_S = 10.0  # during a run: unanswered this long (a stopped process: at once) = hung
# ps/proc state letters that mean a process cannot answer whatever the load
STOPPED_STATES = {"T": "stopped", "t": "stopped by a tracer"}


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
    hung_for_s: float | None = None  # set: the process runs but has not answered its health check this long
    state: str | None = None  # its process state letter (T: stopped), when known
    pod: str | None = None  # kubernetes: the process is a pod's container (no pid, its log is the pod's)

    @property
    def hung(self) -> bool:
        return self.hung_for_s is not None

    def describe(self) -> str:
        """'decode:0 (decode-0, node local, pid 1234) exited with code -9', or '... is hung: no answer to its
        health check for 12 s, process state T (stopped)' (a pod's: 'pod NAME' for the pid)."""
        who = self.role if self.role == "router" else f"{self.role}:{self.replica}"
        if self.hung:
            how = f"is hung: no answer to its health check for {self.hung_for_s:.0f} s"
            if self.state:
                how += f", process state {self.state}" + (f" ({STOPPED_STATES[self.state]})"
                                                          if self.state in STOPPED_STATES else "")
        else:
            how = "exited" if self.exit_code in (None, -1) else f"exited with code {self.exit_code}"
        where = f"pod {self.pod}" if self.pod else f"pid {self.pid}"
        return f"{who} ({self.name}, node {self.node}, {where}) {how}"


@dataclass
class Liveness:
    """The verdict over one run: every started process with whether it still runs."""

    run_dir: Path
    dead: list[DeadProcess] = field(default_factory=list)
    checked: int = 0
    stopped: bool = False  # the run is being or was stopped (`pdctl down`, state stopping/stopped)

    @property
    def ok(self) -> bool:
        return not self.dead

    def summary(self) -> str:
        return "; ".join(d.describe() for d in self.dead)

    def error(self, doing: str) -> CheckFailed:
        """CheckFailed (exit 1) naming every dead or hung process, with their log tails as the detail; its
        message ends with the run's diagnosis (pdctl.diagnose: the root cause first)."""
        return with_diagnosis(self._error(doing), self.run_dir, live=not self.stopped,
                              hung={d.name: d.hung_for_s for d in self.dead if d.hung_for_s is not None})

    def _error(self, doing: str) -> CheckFailed:
        tails = "\n".join(f"--- last lines of {d.log or f'pod {d.pod}'} ---\n{d.tail or '(empty)'}" for d in self.dead)
        if self.stopped:
            return CheckFailed(f"{doing}: run {self.run_dir} was stopped (`pdctl down`) while it ran: {self.summary()}",
                               detail=tails)
        what = "a hung process" if all(d.hung for d in self.dead) else "a dead process"
        fix = ("a stopped process resumes with `kill -CONT PID`; else `pdctl restart ROLE:REPLICA`"
               if all(d.hung for d in self.dead) else "`pdctl restart ROLE:REPLICA`, or `pdctl down` and launch again")
        return CheckFailed(f"{doing}: the deployment of run {self.run_dir} has {what}: {self.summary()}; "
                           f"`pdctl status --run-dir {self.run_dir}` shows the rest; {fix}", detail=tails)


class HealthClock:
    """Since when each process has not answered its health check (across looks, for HANG_AFTER_S)."""

    def __init__(self) -> None:
        self._since: dict[str, float] = {}
        self._lock = threading.Lock()

    def unanswered_for(self, name: str, answered: bool, asked_at: float) -> float | None:
        """None when NAME answered (its clock resets); else seconds since its first unanswered question."""
        with self._lock:
            if answered:
                self._since.pop(name, None)
                return None
            since = self._since.setdefault(name, asked_at)
        return time.monotonic() - since


def answers(url: str, *, timeout: float = HEALTH_PROBE_S) -> bool:
    """Whether GET URL gives any HTTP answer (a 503 too) within TIMEOUT: a process that answers is not hung."""
    try:
        requests.get(url, timeout=timeout)
    except requests.RequestException:
        return False
    return True


def process_state(record: dict[str, Any]) -> str | None:
    """RECORD's process state letter through its executor (T: stopped), None when it cannot be read."""
    try:
        return executor_for(record).process_state(record)
    except Exception:  # noqa: BLE001 -- an unreadable state (ssh down) leaves the silence as the evidence
        return None


def patiently(record: dict[str, Any], ask: Callable[[float], T], answered: Callable[[T], bool]) -> tuple[T, str | None]:
    """ASK(timeout) RECORD's health endpoint for HEALTH_PROBE_S; without an answer, read the process state and,
    unless the process is stopped (it cannot answer), ask again for the rest of what the endpoint may take (the
    record's health_timeout_s: SGLang's /health runs a generate, late on a loaded machine). (the last result,
    the state read or None)."""
    got = ask(HEALTH_PROBE_S)
    if answered(got):
        return got, None
    state = process_state(record)
    rest = answers_within(record) - HEALTH_PROBE_S
    if state not in STOPPED_STATES and rest > 0:
        got = ask(rest)
    return got, state


def _hung(record: dict[str, Any], clock: HealthClock, hang_after_s: float) -> tuple[float, str | None] | None:
    """(seconds unanswered, process state) when the running RECORD is hung, else None (it answers, serves no
    HTTP, or has not been silent for HANG_AFTER_S yet and is not stopped)."""
    if not (record.get("url") and record.get("health_path")) or not process_kind(record).http_health:
        return None  # a pod's health is the kubelet's readiness probe (its URL is in-cluster): exit_code reads it
    url, asked_at = record["url"] + record["health_path"], time.monotonic()
    answered, state = patiently(record, lambda timeout: answers(url, timeout=timeout), bool)
    silent = clock.unanswered_for(str(record.get("name")), answered, asked_at)
    if silent is None:
        return None
    if state in STOPPED_STATES or silent >= hang_after_s:
        return silent, state
    return None


def check_run(run_dir: str | Path, *, clock: HealthClock | None = None, hang_after_s: float = 0.0) -> Liveness:
    """Look at every started process of the run in RUN_DIR (workers and router) through its executor; with
    CLOCK, also ask each running one's health endpoint (all at once) and name those silent for HANG_AFTER_S
    (0: one unanswered question of HEALTH_PROBE_S) as hung."""
    path = Path(run_dir)
    state = read_state(path)
    records = all_records(state)
    verdict = Liveness(path.resolve(), checked=len(records), stopped=state.get("status") in ("stopping", "stopped"))
    with ThreadPoolExecutor(max_workers=max(1, min(8, len(records)))) as pool:
        found = list(pool.map(lambda r: _look(r, clock, hang_after_s), records))
    verdict.dead = [d for d in found if d is not None]
    return verdict


def _look(record: dict[str, Any], clock: HealthClock | None, hang_after_s: float) -> DeadProcess | None:
    """RECORD as a DeadProcess when it exited (or, with CLOCK, hangs), else None."""
    try:
        code = executor_for(record).exit_code(record)
    except Exception:  # noqa: BLE001 -- an unreadable process (ssh down) is not a verdict of death
        return None
    hung = _hung(record, clock, hang_after_s) if code is None and clock is not None else None
    if code is None and hung is None:
        return None
    return DeadProcess(
        name=str(record.get("name")), role=str(record.get("role")), replica=int(record.get("replica") or 0),
        node=str(record.get("node")), pid=record.get("pid"), exit_code=code, log=record.get("log"),
        tail=_tail(record), hung_for_s=hung[0] if hung else None, state=hung[1] if hung else None,
        pod=record.get("pod") or record.get("pod_selector"))


def _tail(record: dict[str, Any]) -> str:
    try:
        return executor_for(record).read_log(record, LOG_TAIL_LINES) or ""
    except Exception as exc:  # noqa: BLE001 -- a log we cannot read must not hide who died
        return f"(could not read the log: {exc})"


def require_alive(run_dir: str | Path | None, doing: str) -> None:
    """Before starting DOING against a run: CheckFailed (exit 1) naming the dead or hung processes, if any (a
    process that gives no answer to one health check of HEALTH_PROBE_S is hung here)."""
    if run_dir is None:
        return
    verdict = check_run(run_dir, clock=HealthClock())
    if not verdict.ok:
        raise verdict.error(doing)


class Watchdog:
    """For a command in progress against a run: `dead()` looks at the processes (exited, or hung: silent for
    HANG_AFTER_S) when requests fail and every RECHECK_S while they are in flight, at most once per RECHECK_S
    (however many requests fail at once), from any thread; the first death or hang seen sticks."""

    def __init__(self, run_dir: str | Path | None, *, recheck_s: float = RECHECK_S,
                 hang_after_s: float = HANG_AFTER_S) -> None:
        self.run_dir = Path(run_dir) if run_dir is not None else None
        self.recheck_s = recheck_s
        self.hang_after_s = hang_after_s
        self.clock = HealthClock()
        self._lock = threading.Lock()
        self._last = -float("inf")
        self.found: Liveness | None = None

    def dead(self) -> Liveness | None:
        """The run's verdict if a process is dead or hung (looked at now, or at most RECHECK_S ago), else None."""
        if self.run_dir is None:
            return None
        with self._lock:
            if self.found is not None:
                return self.found
            now = time.monotonic()
            if now - self._last < self.recheck_s:
                return None
            self._last = now
            verdict = check_run(self.run_dir, clock=self.clock, hang_after_s=self.hang_after_s)
            if not verdict.ok:
                self.found = verdict
            return self.found

    def last_look(self) -> Liveness | None:
        """At the command's deadline: look now, and call any process that has not answered since the first
        unanswered question (however shortly) hung; the verdict, or None when every process answers."""
        if self.run_dir is None:
            return None
        with self._lock:
            if self.found is None:
                verdict = check_run(self.run_dir, clock=self.clock, hang_after_s=0.0)
                self.found = None if verdict.ok else verdict
            return self.found


def deadline_error(doing: str, deadline_s: float, found: Liveness | None, *, hint: str = "raise --deadline",
                   kept: str = "") -> CheckFailed:
    """The CheckFailed (exit 1) of a command DOING stopped at its --deadline: naming what FOUND (the watchdog's
    last look) says is dead or hung, else saying every process answers (slow, not hung), with HINT."""
    doing = f"{doing} stopped at its deadline of {deadline_s:g} s{kept}"
    if found is not None:
        return found.error(doing)
    return CheckFailed(f"{doing}; every process of the deployment answers its health check: it is slow, not hung "
                       f"({hint})")


def run_watched(work: Callable[[], T], watchdog: Watchdog, *, doing: str, deadline_s: float | None = None) -> T:
    """WORK's result, run in a worker thread while this one looks at the run's processes every RECHECK_S:
    CheckFailed (exit 1) naming a dead or hung process as soon as one is seen, or when DEADLINE_S passes
    (naming what does not answer then, else saying the deployment is slow). For blocking work (parity's
    requests, bench serve's tool) whose own timeouts would otherwise run for minutes against a hung worker:
    the worker thread is a daemon left to the process's exit, its requests were to a process that hangs."""
    box: dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            box["result"] = work()
        except BaseException as exc:  # noqa: BLE001 -- handed to the waiting thread as it is
            box["error"] = exc
        finally:
            done.set()

    threading.Thread(target=run, name="pdctl-watched", daemon=True).start()
    end = None if deadline_s is None else time.monotonic() + deadline_s
    while not done.wait(timeout=watchdog.recheck_s if end is None else
                        max(0.0, min(watchdog.recheck_s, end - time.monotonic()))):
        if end is not None and deadline_s is not None and time.monotonic() >= end:
            raise deadline_error(doing, deadline_s, watchdog.last_look())
        found = watchdog.dead()
        if found is not None:
            raise found.error(f"{doing} stopped")
    if "error" in box:
        raise box["error"]
    return box["result"]
