"""Starting a rendered deployment that passed its verdicts: start workers, wait healthy, start the router,
wait until it routes; then (foreground) watch until something exits or the user stops it.

Any failure (a process exits, a port is taken, the timeout passes, Ctrl-C) stops everything this launch
started before the error propagates, so a failed launch never leaves servers behind; the error names the
failing process and carries the tail of its log.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pdctl.diagnose.collect import with_diagnosis
from pdctl.errors import CheckFailed, UserError
from pdctl.executors import executor_for
from pdctl.launch.health import router_ready, worker_health
from pdctl.launch.shutdown import stop_records
from pdctl.render.kinds import process_kind
from pdctl.render.spec import Deployment, ProcessSpec
from pdctl.runs import STATE_FILE, read_state, remember_latest
from pdctl.runs.state import RunState, all_records, new_record, tagged, write_deployment

__all__ = ["Launch", "precheck_ports", "refuse_running", "supervise"]

# progress(name, phase, detail): phase in starting | waiting | healthy | failed | stopped
Progress = Callable[[str, str, str], None]
POLL_S = 0.5
LOG_TAIL_LINES = 30


def _quiet(name: str, phase: str, detail: str) -> None:
    return None


def _port_taken(host: str, port: int) -> bool:
    """True if something listens on HOST:PORT here (bind with SO_REUSEADDR, as servers do, so sockets
    in TIME_WAIT from an earlier run do not count)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return True
    return False


def precheck_ports(deployment: Deployment) -> None:
    """Fail before starting anything if a local process's port is already in use: otherwise a health
    probe could be answered by whatever holds the port, and the failure would surface late and vaguely."""
    for proc in deployment.processes():
        if not process_kind(proc).here or not proc.bind_host:
            continue
        for port in proc.ports:
            try:
                taken = _port_taken(proc.bind_host, port)
            except (socket.gaierror, UnicodeError) as exc:
                raise UserError(f"{proc.name}: cannot bind to host {proc.bind_host!r}: {exc}") from exc
            if taken:
                raise CheckFailed(
                    f"{proc.name} (node {proc.node}) cannot start: port {port} on "
                    f"{proc.bind_host} is already in use; nothing was started",
                    detail=f"free the port or change it in the topology; command: {proc.command}",
                )


def log_tail(record: dict[str, Any], lines: int = LOG_TAIL_LINES) -> str:
    """The tail of a process's log, labelled, for error messages."""
    try:
        text = executor_for(record).read_log(record, lines)
    except Exception as exc:  # noqa: BLE001 -- a log we cannot read must not hide the original failure
        text = f"(could not read the log: {exc})"
    return f"--- last {lines} lines of {record['log']} ---\n{text or '(empty)'}"


class Launch:
    """One launch in progress: what was started, and the state file that records it."""

    def __init__(self, deployment: Deployment, run_dir: Path, progress: Progress) -> None:
        self.deployment = deployment
        self.run_dir = run_dir
        self.progress = progress
        self.state = RunState(run_dir, deployment)
        self.lock = threading.Lock()

    @classmethod
    def begin(
        cls, deployment: Deployment, run_dir: Path, progress: Progress
    ) -> Launch:
        """A launch into RUN_DIR (local or slurm): refused while RUN_DIR's previous deployment runs; the
        rendered deployment and the topology file are written to RUN_DIR before anything starts."""
        refuse_running(run_dir)
        launch = cls(deployment, run_dir, progress)
        write_deployment(run_dir, deployment)
        launch.state.record_topology(deployment.topo)  # with its --set overrides, if any
        return launch

    def start(self, proc: ProcessSpec) -> dict[str, Any]:
        proc = tagged(proc, self.run_dir)  # `pdctl down` finds it even without state.json
        record = new_record(proc, self.run_dir)
        self.progress(proc.name, "starting", proc.node)
        record.update(executor_for(proc).start(proc, record["log"]))
        with self.lock:
            self.state.add(record)  # on disk at once: `pdctl down` can find it whatever happens next
        return record

    def start_all(self, procs: list[ProcessSpec]) -> list[dict[str, Any]]:
        """Start PROCS concurrently (remote starts are ssh round trips); records come back in start order."""
        with ThreadPoolExecutor(max_workers=min(16, max(1, len(procs)))) as pool:
            futures = [pool.submit(self.start, proc) for proc in procs]
        records = [f.result() for f in futures]  # re-raises the first start failure
        order = {proc.name: i for i, proc in enumerate(self.deployment.processes())}
        with self.lock:
            self.state.doc["processes"].sort(key=lambda r: order.get(r["name"], len(order)))
            self.state.save()
        return records

    def fail_if_exited(self, record: dict[str, Any], what: str) -> None:
        code = executor_for(record).exit_code(record)
        if code is not None:
            self.fail_exited(record, code, what)

    def fail_exited(self, record: dict[str, Any], code: int, what: str) -> None:
        self.progress(record["name"], "failed", f"exited ({code})")
        how = f"exited with code {code}" if code != -1 else "exited"
        raise CheckFailed(f"{record['name']} on node {record['node']} {how} {what}", detail=log_tail(record))

    def wait_healthy(
        self,
        records: list[dict[str, Any]],
        deadline: float,
        started: float,
        check: Callable[[dict[str, Any]], tuple[bool, str]],
    ) -> None:
        """Poll until CHECK passes for every record; fail on an exit or at DEADLINE."""
        pending = list(records)
        last: dict[str, str] = {}

        def poll(record: dict[str, Any]) -> tuple[bool, str, int | None]:
            code = executor_for(record).exit_code(record)
            if code is not None:
                return False, "exited", code
            return (*check(record), None)

        with ThreadPoolExecutor(max_workers=min(16, max(1, len(records)))) as pool:
            while pending:
                results = list(pool.map(poll, pending))
                elapsed = time.monotonic() - started
                for record, (ok, what, code) in zip(list(pending), results):
                    if code is not None:
                        self.fail_exited(record, code, "before it was healthy")
                    last[record["name"]] = what
                    if ok:
                        pending.remove(record)
                        self.progress(record["name"], "healthy", f"{elapsed:.0f}s")
                    else:
                        self.progress(record["name"], "waiting", f"{what} ({elapsed:.0f}s)")
                if not pending:
                    return
                if time.monotonic() >= deadline:
                    record = pending[0]
                    self.progress(record["name"], "failed", "timeout")
                    raise CheckFailed(
                        f"{record['name']} on node {record['node']} was not healthy within the timeout "
                        f"({deadline - started:.0f}s; last probe: {last.get(record['name'])})",
                        detail=log_tail(record),
                    )
                time.sleep(POLL_S)

    def wait_router(
        self, router: dict[str, Any], workers: list[dict[str, Any]], deadline: float, started: float
    ) -> None:
        """Wait until ROUTER is ready and lists every worker of WORKERS that serves HTTP as healthy."""
        expected = sum(1 for r in workers if r.get("url"))
        self.wait_healthy([router], deadline, started, lambda r: router_ready(r["url"], expected))

    def run(self, timeout: float) -> None:
        started = time.monotonic()
        deadline = started + timeout
        workers = self.start_all(self.deployment.workers)
        self.wait_healthy(workers, deadline, started, worker_health)
        self.wait_router(self.start(self.deployment.router), workers, deadline, started)


def refuse_running(run_dir: Path) -> None:
    """Refuse to launch into a run dir whose previous deployment still runs: its state.json is the only
    record of those processes, and overwriting it would orphan them."""
    if not (run_dir / STATE_FILE).exists():
        return
    try:
        records = all_records(read_state(run_dir))
    except UserError as exc:  # it may be the only record of live processes: never overwrite it blindly
        raise UserError(
            f"{run_dir / STATE_FILE} of a previous launch cannot be read ({exc.message}); it may be the only "
            "record of processes that still run, so pdctl will not overwrite it",
            detail=f"check for leftover processes, then remove {run_dir / STATE_FILE} (or use another --run-dir)",
        ) from exc
    running = [r["name"] for r in records if executor_for(r).group_alive(r)]
    if running:
        raise UserError(
            f"{run_dir} holds a deployment that is still running ({', '.join(running)}); "
            f"`pdctl down --run-dir {run_dir}` first, or launch with another --run-dir"
        )


def supervise(
    deployment: Deployment,
    run_dir: Path,
    *,
    timeout: float = 600.0,
    detach: bool = True,
    progress: Progress | None = None,
    on_ready: Callable[[dict[str, Any]], None] | None = None,
    remember: bool = True,
    state: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Start DEPLOYMENT (rendered, past its verdicts) into RUN_DIR and return its state document once the
    router routes to every worker.

    With detach=False, stay and watch the processes after that (calling ON_READY with the state first):
    Ctrl-C / SIGTERM / a process exiting tears everything down. On any failure everything started is
    stopped and CheckFailed (exit 1) names the failing process with its log tail. remember=False leaves
    `.pdctl/latest` alone. STATE: extra top-level keys of state.json (the Slurm job, the nodes it was given)."""
    progress = progress or _quiet
    launch = Launch.begin(deployment, run_dir, progress)
    launch.state.doc.update(state or {})
    launch.state.save()
    if remember:
        remember_latest(run_dir)
    restore = _signals_to_interrupt() if not detach else None
    try:
        precheck_ports(deployment)
        launch.run(timeout)
        launch.state.set_status("running")
        if detach:
            return launch.state.document()
        if on_ready is not None:
            on_ready(launch.state.document())
        _watch(launch)
        return launch.state.document()  # not reached: _watch only ends by raising
    except BaseException as exc:
        if isinstance(exc, CheckFailed):  # a process exited or never turned healthy: diagnose before stopping
            with_diagnosis(exc, run_dir, live=True)  # all (their ends are news, pdctl's stop is not yet)
        with _no_interrupts():  # a second Ctrl-C must not cut the teardown short and leave orphans
            stop_records(launch.state.records())
        for record in launch.state.records():
            progress(record["name"], "stopped", "")
        launch.state.set_status("stopped" if isinstance(exc, KeyboardInterrupt) else "failed")
        raise
    finally:
        if restore is not None:
            restore()


def _watch(launch: Launch) -> None:
    """Foreground mode: poll until a process exits (CheckFailed) or the user interrupts."""
    while True:
        for record in launch.state.records():
            launch.fail_if_exited(record, "while serving")
        time.sleep(1.0)


@contextlib.contextmanager
def _no_interrupts() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM/SIGHUP for the duration (main thread only; elsewhere signals cannot land)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in sigs}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _signals_to_interrupt() -> Callable[[], None] | None:
    """Make SIGTERM/SIGHUP behave like Ctrl-C in foreground mode, so they tear down too."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}

    def restore() -> None:
        for sig, old in previous.items():
            signal.signal(sig, old)

    return restore
