"""The local executor: each process in its own session (= process group), output to a log file.

A new session per process means a Ctrl-C in the terminal does not reach the servers directly (pdctl
decides how to tear down), killing the group reaches every child (e.g. tp rank workers), and the processes
outlive a killed pdctl so that `pdctl down` can still find and stop them by pgid.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pdctl.executors.base import CommandResult, Wrap, wrapped
from pdctl.executors.logtail import tail_lines
from pdctl.render.spec import ProcessSpec

KILL_WAIT_S = 5.0


def proc_stat(pid: int) -> tuple[str, int, int] | None:
    """(state letter, pgid, start time in clock ticks) of PID from /proc, or None if there is no such pid."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # gone, or not ours to read
        return None
    # the command name (field 2) is in parentheses and may contain spaces: split after the last ')'
    rest = raw[raw.rfind(")") + 2 :].split()
    return rest[0], int(rest[2]), int(rest[19])


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) pids whose process group is PGID."""
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            stat = proc_stat(int(entry))
            if stat is not None and stat[1] == pgid and stat[0] != "Z":
                members.append(int(entry))
    return members


def groups_tagged(key: str, value: str, log_dir: Path) -> list[int]:
    """Process groups (pgids) with a live member that carries KEY=VALUE in its environment, or writes its
    stdout or stderr to a file under LOG_DIR (a process that rewrites its title, as sglang-router does, also
    overwrites the environment /proc shows; its open log stays). Our own processes, or any as root."""
    want = f"{key}={value}".encode()
    logs = str(log_dir.resolve()) + os.sep
    pgids = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            environ = Path(f"/proc/{entry}/environ").read_bytes()
        except OSError:
            continue
        outputs = []
        for fd in (1, 2):
            try:
                outputs.append(os.readlink(f"/proc/{entry}/fd/{fd}"))
            except OSError:
                pass
        if want in environ.split(b"\0") or any(o.startswith(logs) for o in outputs):
            stat = proc_stat(int(entry))
            if stat is not None and stat[0] != "Z":
                pgids.add(stat[1])
    return sorted(pgids)


def _reap(pid: int) -> int | None:
    """Collect PID's exit status if it is our child (else None): keeps no zombies behind in pdctl."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return None
    if done == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def run_captured(argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
    """Run ARGV here (its own process group) to completion with its output captured; at TIMEOUT the whole
    group is killed (a child of the command cannot outlive it) and returncode is None. A program that does
    not exist is returncode 127 with the reason in stderr, as a shell reports it."""
    try:
        child = subprocess.Popen(
            argv,
            env={**os.environ, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            errors="replace",
            start_new_session=True,
        )
    except OSError as exc:
        return CommandResult(127, "", f"{argv[0]}: {exc.strerror or exc}")
    try:
        out, err = child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        out, err = child.communicate()
        return CommandResult(None, out or "", (err or "") + f"\n(timed out after {timeout:g}s)")
    return CommandResult(child.returncode, out, err)


def popen_piped(argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """ARGV started here in its own process group, stdin/stdout/stderr as text pipes."""
    return subprocess.Popen(
        argv,
        env={**os.environ, **(env or {})},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        bufsize=1,
        start_new_session=True,
    )


class LocalExecutor:
    """Processes on this machine (nodes without `ssh:`); `run`/`popen` behind WRAP when given (docker)."""

    kind = "local"

    def __init__(self, wrap: Wrap | None = None) -> None:
        self.wrap = wrap

    def health(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """None: a process's health is its URL's answer."""
        return None

    def platform_lines(self, record: dict[str, Any]) -> list[str]:
        """[]: no platform keeps records of a process here (its exit code and state are read directly)."""
        return []

    def unreachable(self, result: CommandResult) -> bool:
        """False: this machine is always reached (a wrapper's failure is the command's)."""
        return False

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        return run_captured(wrapped(self.wrap, argv, env, interactive=False), timeout=timeout,
                            env=None if self.wrap else env)

    def popen(self, argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        return popen_piped(wrapped(self.wrap, argv, env, interactive=True), env=None if self.wrap else env)

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "wb") as fh:  # a fresh log per launch: a failure's log tail is this run's
            fh.write(f"# pdctl: {proc.command}\n".encode())
            fh.flush()
            child = subprocess.Popen(
                proc.launch_argv,  # `[wrapper] env K=V ... argv`: the environment travels with the command
                env=dict(os.environ),
                stdin=subprocess.DEVNULL,
                stdout=fh,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        stat = proc_stat(child.pid)
        return {
            "executor": self.kind,
            "pid": child.pid,
            "pgid": child.pid,
            "start_time": stat[2] if stat else None,
            "_popen": child,
        }

    def _same_process(self, record: dict[str, Any]) -> tuple[str, int, int] | None:
        """The /proc stat of the record's pid if it is still that process (guards against pid reuse)."""
        stat = proc_stat(int(record["pid"]))
        if stat is None:
            return None
        if record.get("start_time") is not None and stat[2] != record["start_time"]:
            return None
        return stat

    def exit_code(self, record: dict[str, Any]) -> int | None:
        popen = record.get("_popen")
        if popen is not None:
            return popen.poll()
        stat = self._same_process(record)
        if stat is not None and stat[0] != "Z":
            return None
        code = _reap(int(record["pid"]))
        return -1 if code is None else code

    def process_state(self, record: dict[str, Any]) -> str | None:
        stat = self._same_process(record)
        return stat[0] if stat is not None else None

    def group_alive(self, record: dict[str, Any]) -> bool:
        stat = proc_stat(int(record["pid"]))
        if (
            stat is not None
            and record.get("start_time") is not None
            and stat[2] != record["start_time"]
            and stat[1] == int(record["pgid"])
        ):
            return False  # the pid (and group) now belongs to another process: ours are gone
        return bool(group_members(int(record["pgid"])))

    def signal_group(self, record: dict[str, Any], sig: int) -> None:
        if not self.group_alive(record):
            return
        try:
            os.killpg(int(record["pgid"]), sig)
        except (ProcessLookupError, PermissionError):
            pass
        popen = record.get("_popen")
        if popen is not None:
            popen.poll()
        else:
            _reap(int(record["pid"]))

    def stop(self, record: dict[str, Any], grace_s: float) -> str:
        if not self.group_alive(record):
            self.exit_code(record)  # reap it if it is our child
            return "not running"
        self.signal_group(record, signal.SIGTERM)
        if self._wait_gone(record, grace_s):
            return "stopped"
        self.signal_group(record, signal.SIGKILL)
        return "killed" if self._wait_gone(record, KILL_WAIT_S) else "still running"

    def _wait_gone(self, record: dict[str, Any], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            self.exit_code(record)  # reaps our own child, so it does not linger as a zombie group leader
            if not self.group_alive(record):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.1)

    def read_log(self, record: dict[str, Any], tail: int) -> str:
        return tail_lines(Path(record["log"]), tail)

    def follow_log(self, record: dict[str, Any], tail: int) -> Iterator[str]:
        path = Path(record["log"])
        text = tail_lines(path, tail)
        if text:
            yield text if text.endswith("\n") else text + "\n"
        offset = path.stat().st_size if path.exists() else 0
        while True:
            if path.exists() and path.stat().st_size > offset:
                with open(path, "rb") as fh:
                    fh.seek(offset)
                    chunk = fh.read()
                offset += len(chunk)
                yield chunk.decode("utf-8", "replace")
            else:
                time.sleep(0.3)


__all__ = ["LocalExecutor", "group_members", "popen_piped", "proc_stat", "run_captured"]
