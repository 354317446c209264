"""The executor protocol every kind implements, and the short-command primitives they share.

Every method after `start` works from the process's state.json record alone, so `pdctl status/logs/down`
work from a fresh pdctl process, even after the launching one was killed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Protocol

from pdctl.render.spec import ProcessSpec

# What a short command on a node is put behind (docker run ... IMAGE, srun ...): called with whether the
# command talks over stdin (popen) — docker then needs -i.
Wrap = Callable[[bool], list[str]]


def wrapped(wrap: Wrap | None, argv: list[str], env: dict[str, str] | None, *, interactive: bool) -> list[str]:
    """ARGV behind WRAP with ENV as `env K=V` inside it (so it reaches a container or a Slurm node); without
    WRAP, ARGV as it is (the executor passes ENV itself)."""
    if wrap is None:
        return argv
    return [*wrap(interactive), *(["env", *(f"{k}={v}" for k, v in env.items())] if env else []), *argv]


@dataclass(frozen=True)
class CommandResult:
    """What a short command run on a node printed and returned (returncode None: it timed out)."""

    returncode: int | None
    stdout: str
    stderr: str


class Executor(Protocol):
    """Start and control processes on one kind of node."""

    kind: str

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        """Start PROC with stdout+stderr to LOG (a path on the node); returns its state record fields
        (pid, pgid, executor, ...)."""
        ...

    def exit_code(self, record: dict[str, Any]) -> int | None:
        """None while the process group leader runs; its exit code (or -1 if unknown) once it has exited."""
        ...

    def process_state(self, record: dict[str, Any]) -> str | None:
        """The state letter of the record's process (ps/proc: R, S, D, T stopped, Z), or None when unknown."""
        ...

    def group_alive(self, record: dict[str, Any]) -> bool:
        """Whether any process of the record's process group is still running (zombies excluded)."""
        ...

    def signal_group(self, record: dict[str, Any], sig: int) -> None:
        """Send SIG to the whole process group; a group that is gone is not an error."""
        ...

    def stop(self, record: dict[str, Any], grace_s: float) -> str:
        """SIGTERM the group, SIGKILL it if it outlives GRACE_S; 'stopped' | 'killed' | 'not running' |
        'still running' (one round trip per process on remote nodes)."""
        ...

    def read_log(self, record: dict[str, Any], tail: int) -> str:
        """The last TAIL lines of the process's log ('' if there is none yet)."""
        ...

    def follow_log(self, record: dict[str, Any], tail: int) -> Iterator[str]:
        """The last TAIL lines, then new lines as they are written (until interrupted)."""
        ...

    def platform_lines(self, record: dict[str, Any]) -> list[str]:
        """What the platform running the record's process records of its end or state, one line each (a pod's
        waiting or last termination reason; a Slurm job's end: TIMEOUT, NODE_FAIL ...): diagnose reads them
        beside the log; [] where no platform keeps such records (a process on this machine or over ssh)."""
        ...

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """Run ARGV on this executor's node to completion (no shell on our side; quoted for ssh), capture
        its output; TIMEOUT seconds at most (then returncode None)."""
        ...

    def health(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """The record's status from the kind itself (alive, healthy, detail, and what else it knows: a pod's
        readiness, restarts, reason), or None: pdctl probes the process's health URL itself."""
        ...

    def unreachable(self, result: CommandResult) -> bool:
        """Whether RESULT of `run` means the node was not reached at all (ssh's own failure), rather than the
        command failing there."""
        ...

    def popen(self, argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """Start ARGV on this executor's node with its stdin/stdout (text) connected to the returned Popen
        (stderr too, as a pipe): a conversation with a process on the node, e.g. preflight's transfer peers.
        The process reads EOF on stdin when the Popen is closed or killed, and must then end by itself."""
        ...
