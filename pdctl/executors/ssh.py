"""The ssh executor: processes on remote nodes through the system `ssh` client.

Why the system client: it honours the user's ~/.ssh/config, agents and known_hosts exactly as their own
`ssh` does. Safety: pdctl never runs a local shell; every value that reaches the remote shell (argv, env,
paths) is shlex-quoted, so no topology value can inject a command. The remote command is run by `sh -c` so
that it is POSIX whatever the user's login shell is.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed
from pdctl.executors.base import CommandResult, Wrap, wrapped
from pdctl.executors.local import popen_piped, run_captured
from pdctl.render.spec import ProcessSpec

SSH_TIMEOUT_S = 30
SSH_FAILURE = 255  # ssh's own exit status: it did not reach the node (or lost it)
# Live members of a process group, zombies excluded (exit 0 iff any).
_GROUP_ALIVE = "ps -eo pgid=,stat= | awk -v g={pgid} '$1 == g && $2 !~ /^Z/ {{n++}} END {{exit n == 0}}'"
# SIGTERM, wait up to the grace period, SIGKILL: all in one remote script (one ssh round trip).
_STOP = """alive() {{ {alive}; }}
alive || {{ echo 'not running'; exit 0; }}
kill -TERM -{pgid} 2>/dev/null
end=$(( $(date +%s) + {grace} ))
while alive; do
  if [ "$(date +%s)" -ge "$end" ]; then
    kill -KILL -{pgid} 2>/dev/null; n=0
    while alive && [ $n -lt 25 ]; do sleep 0.2; n=$((n + 1)); done
    if alive; then echo 'still running'; else echo killed; fi
    exit 0
  fi
  sleep 0.2
done
echo stopped"""


# While shared_connections() is active: the directory of its control sockets (one master connection per node).
_shared: list[Path] = []
# A master outlives its last session this long at most (a run that could not close it leaves nothing for long).
CONTROL_PERSIST_S = 60
_OWN_MUX = {"controlmaster", "controlpath", "controlpersist"}


@contextlib.contextmanager
def shared_connections() -> Iterator[Path]:
    """Within this block, every ssh to a node reuses one connection per node (OpenSSH's ControlMaster, its
    sockets in a directory of this run only); at the end each master is closed and the directory removed.

    Why: a preflight of N nodes runs a probe and a transfer agent per node, `status` a check per process; a new
    connection each time pays ssh's handshake (and the node's sshd its fork and key exchange) again. A node
    whose `ssh.options` set their own ControlMaster/ControlPath keep theirs."""
    base = tempfile.gettempdir()
    directory = Path(tempfile.mkdtemp(prefix="pdctl-ssh-", dir=base if len(base) <= 40 else "/tmp"))
    _shared.append(directory)
    try:
        yield directory
    finally:
        _shared.remove(directory)
        for sock in directory.iterdir():
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                subprocess.run(["ssh", "-o", f"ControlPath={sock}", "-O", "exit", "pdctl-node"], check=False,
                               capture_output=True, timeout=10, stdin=subprocess.DEVNULL)
        shutil.rmtree(directory, ignore_errors=True)


def _mux_options(ssh: dict[str, Any]) -> list[str]:
    if not _shared or _OWN_MUX & {str(k).lower() for k in (ssh.get("options") or {})}:
        return []
    return ["-o", "ControlMaster=auto", "-o", f"ControlPath={_shared[-1]}/%C",
            "-o", f"ControlPersist={CONTROL_PERSIST_S}"]


def ssh_argv(host: str, ssh: dict[str, Any], remote_command: str) -> list[str]:
    """`ssh -o BatchMode=yes [-p P] [-l U] [-i K] [-o K=V ...] -- HOST 'sh -c <script>'` as an argv (inside
    shared_connections(): through the node's shared connection).

    BatchMode: never prompt for a password (a launch must not hang on a prompt)."""
    argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", *_mux_options(ssh)]
    if ssh.get("port"):
        argv += ["-p", str(int(ssh["port"]))]
    if ssh.get("user"):
        argv += ["-l", str(ssh["user"])]
    if ssh.get("key"):
        argv += ["-i", str(ssh["key"])]
    for key, val in (ssh.get("options") or {}).items():
        argv += ["-o", f"{key}={val}"]
    return argv + ["--", host, "sh -c " + shlex.quote(remote_command)]


def remote_command(argv: list[str], env: dict[str, str] | None = None) -> str:
    """ARGV (with ENV as `env K=V ...` in front) as one shell-quoted command line for the remote `sh -c`."""
    prefix = ["env", *(f"{k}={v}" for k, v in (env or {}).items())] if env else []
    return shlex.join([*prefix, *argv])


# Until the started process leads its own group (setsid has run), at most GROUP_WAIT_S: a loaded node may run the
# background job's setsid() some time after `$!` is known, and the record says pgid = pid.
GROUP_WAIT_S = 10
_LEADS_GROUP = ('n=0; while [ $n -lt {tries} ] && kill -0 $pid 2>/dev/null && '
                '[ "$(ps -o pgid= -p $pid | tr -d " ")" != "$pid" ]; do sleep 0.05; n=$((n+1)); done')


def start_script(proc: ProcessSpec, log: str) -> str:
    """The remote sh script that starts PROC detached in a new session and prints its pid (= its pgid:
    setsid in a non-interactive shell's background job does not fork, so the pid leads the new group once
    setsid() has run, which the script waits for)."""
    log_dir = log.rsplit("/", 1)[0] or "/"
    command = shlex.join(["setsid", *proc.launch_argv])
    header = shlex.quote(f"# pdctl: {proc.command}")
    q_log = shlex.quote(log)
    return (
        f"mkdir -p {shlex.quote(log_dir)} && printf '%s\\n' {header} > {q_log} && "
        f"{{ {command} >> {q_log} 2>&1 < /dev/null & pid=$!; {_LEADS_GROUP.format(tries=GROUP_WAIT_S * 20)}; "
        "echo $pid; }"
    )


class SSHExecutor:
    """Processes on a node with `ssh:` in the topology."""

    kind = "ssh"

    def __init__(self, host: str, ssh: dict[str, Any], wrap: Wrap | None = None) -> None:
        self.host = host
        self.ssh = ssh
        self.wrap = wrap  # run/popen behind it (docker run ... IMAGE) when given

    def _remote(self, argv: list[str], env: dict[str, str] | None, *, interactive: bool) -> str:
        return remote_command(wrapped(self.wrap, argv, env, interactive=interactive), None if self.wrap else env)

    def health(self, record: dict[str, Any]) -> dict[str, Any] | None:
        """None: a process's health is its URL's answer."""
        return None

    def platform_lines(self, record: dict[str, Any]) -> list[str]:
        """[]: no platform keeps records of a process started over ssh."""
        return []

    def unreachable(self, result: CommandResult) -> bool:
        """ssh exits 255 when it fails itself (no route, refused, authentication), whatever ran there."""
        return result.returncode == SSH_FAILURE

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        """ARGV run on the node by `sh -c` (every word quoted); ssh's own failure is returncode 255."""
        return run_captured(ssh_argv(self.host, self.ssh, self._remote(argv, env, interactive=False)),
                            timeout=timeout)

    def popen(self, argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        # The remote process reads EOF on stdin when this ssh client ends (its channel closes).
        return popen_piped(ssh_argv(self.host, self.ssh, self._remote(argv, env, interactive=True)))

    def run_script(self, script: str, *, timeout: float = SSH_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
        """Run SCRIPT on the node with sh; returns the completed process (never raises on exit codes)."""
        try:
            return subprocess.run(
                ssh_argv(self.host, self.ssh, script),
                check=False,
                capture_output=True,
                text=True,
                timeout=timeout,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess([], 255, "", f"ssh to {self.host} timed out after {timeout}s")

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        done = self.run_script(start_script(proc, log))
        pid = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        if done.returncode != 0 or not pid.isdigit():
            raise CheckFailed(
                f"could not start {proc.name} on node {proc.node} ({self.host}) over ssh "
                f"(exit {done.returncode})",
                detail=(done.stderr or done.stdout).strip()[-2000:],
            )
        return {"executor": self.kind, "pid": int(pid), "pgid": int(pid), "start_time": None}

    def exit_code(self, record: dict[str, Any]) -> int | None:
        # The remote shell is gone, so the exact code is not known; "exited" is what matters.
        done = self.run_script(
            f"kill -0 {int(record['pid'])} 2>/dev/null && "
            f"! ps -o stat= -p {int(record['pid'])} | grep -q '^Z'"
        )
        if done.returncode == 255:
            return None  # ssh itself failed: do not declare the process dead on a network hiccup
        return None if done.returncode == 0 else -1

    def process_state(self, record: dict[str, Any]) -> str | None:
        done = self.run_script(f"ps -o stat= -p {int(record['pid'])}")
        state = done.stdout.strip()
        return state[0] if done.returncode == 0 and state else None

    def group_alive(self, record: dict[str, Any]) -> bool:
        done = self.run_script(_GROUP_ALIVE.format(pgid=int(record["pgid"])))
        # 1 = no live member; anything else but 0 is an ssh failure: assume alive rather than lose track
        return done.returncode != 1

    def signal_group(self, record: dict[str, Any], sig: int) -> None:
        self.run_script(f"kill -{int(sig)} -{int(record['pgid'])} 2>/dev/null; true")

    def stop(self, record: dict[str, Any], grace_s: float) -> str:
        pgid = int(record["pgid"])
        script = _STOP.format(alive=_GROUP_ALIVE.format(pgid=pgid), pgid=pgid, grace=max(0, round(grace_s)))
        done = self.run_script(script, timeout=SSH_TIMEOUT_S + grace_s + 10)
        outcome = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
        if done.returncode != 0 or outcome not in ("stopped", "killed", "not running", "still running"):
            return f"unknown (ssh exit {done.returncode}: {(done.stderr or done.stdout).strip()[-200:]})"
        return outcome

    def read_log(self, record: dict[str, Any], tail: int) -> str:
        done = self.run_script(f"tail -n {int(tail)} {shlex.quote(record['log'])} 2>/dev/null; true")
        return done.stdout.rstrip("\n")

    def follow_log(self, record: dict[str, Any], tail: int) -> Iterator[str]:
        argv = ssh_argv(self.host, self.ssh, f"tail -n {int(tail)} -f {shlex.quote(record['log'])}")
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        try:
            assert child.stdout is not None
            yield from child.stdout
        finally:  # the local ssh client; the remote `tail -f` ends with its session
            child.terminate()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait(timeout=10)
