"""Executors: how a rendered process is started, checked, signalled and read, on some node.

One small protocol (`Executor`) with three implementations: `local` (subprocesses in their own process
groups), `ssh` (the system ssh client), `slurm` (an sbatch script; see slurm.py, which works on a whole plan
rather than per process). Every method after `start` works from the process's state.json record alone, so
`pdctl status/logs/down` work from a fresh pdctl process, even after the launching one was killed.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from pdctl.errors import UserError
from pdctl.render.spec import ProcessSpec

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology

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

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """Run ARGV on this executor's node to completion (no shell on our side; quoted for ssh), capture
        its output; TIMEOUT seconds at most (then returncode None)."""
        ...

    def popen(self, argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        """Start ARGV on this executor's node with its stdin/stdout (text) connected to the returned Popen
        (stderr too, as a pipe): a conversation with a process on the node, e.g. preflight's transfer peers.
        The process reads EOF on stdin when the Popen is closed or killed, and must then end by itself."""
        ...


def executor_for(record: dict[str, Any] | ProcessSpec) -> Executor:
    """The executor of a process: its record's `executor`, or for a ProcessSpec, ssh iff its node has ssh."""
    from pdctl.executors.local import LocalExecutor
    from pdctl.executors.ssh import SSHExecutor

    if isinstance(record, ProcessSpec):
        if record.executor == "srun":
            from pdctl.executors.slurm import SrunExecutor

            return SrunExecutor()
        return SSHExecutor(record.host, record.ssh) if record.ssh is not None else LocalExecutor()
    kind = record.get("executor", "local")
    if kind == "local":
        return LocalExecutor()
    if kind == "ssh":
        return SSHExecutor(record["host"], record.get("ssh") or {})
    if kind in ("slurm", "srun"):
        from pdctl.executors.slurm import SlurmExecutor, SrunExecutor

        return SlurmExecutor() if kind == "slurm" else SrunExecutor()
    raise UserError(f"process {record.get('name')!r} has executor {kind!r}, which pdctl cannot control here")


def node_executor(node: Node, *, slurm: bool = False, topo: Topology | None = None) -> Executor:
    """The executor for a topology node: ssh when it has `ssh:`, else local; with SLURM, an srun step on the
    Slurm node named by its host. With TOPO, commands run the way its engine runs: in engine.container
    (docker on local/ssh nodes, pyxis under Slurm) and after slurm.setup — so preflight's probes and the
    version question see what the servers will see."""
    from pdctl.executors.local import LocalExecutor
    from pdctl.executors.ssh import SSHExecutor

    if slurm:
        from pdctl.executors.slurm import SlurmExecutor, node_step

        return SlurmExecutor(node=node.target, wrap=node_step(topo, node))
    wrap: Wrap | None = None
    if topo is not None and topo.engine.container is not None:
        from pdctl.render.container import docker_prefix

        def wrap(interactive: bool) -> list[str]:
            return docker_prefix(topo, node, interactive=interactive)

    if node.ssh is not None:
        return SSHExecutor(node.target, node.ssh.model_dump(), wrap=wrap)
    return LocalExecutor(wrap=wrap)


__all__ = ["CommandResult", "Executor", "Wrap", "executor_for", "node_executor", "wrapped"]
