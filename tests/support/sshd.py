"""A real OpenSSH server on 127.0.0.1 for tests of pdctl's ssh executor (no mocks, no fixed ports).

`SSHD.start(tmp_dir)` writes a throwaway host key, a client key authorized for the current user and a
config, and runs `/usr/sbin/sshd -D` on a free port in its own process group; `client_options()` gives what
a topology's `ssh:` section needs to reach it. Tests skip (with the reason) only when sshd is not installed.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.net import free_port

SSHD = "/usr/sbin/sshd"


def sshd_missing_reason() -> str | None:
    """Why a real sshd cannot be started here, or None if it can."""
    if not Path(SSHD).exists():
        return f"{SSHD} not installed (apt-get install openssh-server; scripts/system-deps.sh does it)"
    for tool in ("ssh", "ssh-keygen"):
        if shutil.which(tool) is None:
            return f"{tool} not on PATH (apt-get install openssh-client)"
    return None


@dataclass
class SSHServer:
    """A running sshd: where it listens and the client key that logs in as the current user."""

    port: int
    user: str
    key: Path
    proc: subprocess.Popen
    log: Path
    options: dict[str, str] = field(default_factory=dict)
    host: str = "127.0.0.1"

    def ssh_config(self) -> dict:
        """The topology `ssh:` mapping for a node served by this sshd."""
        return {"user": self.user, "port": self.port, "key": str(self.key), "options": dict(self.options)}

    def run(self, command: str, timeout: float = 20) -> subprocess.CompletedProcess:
        """Run COMMAND over ssh (for test assertions)."""
        argv = ["ssh", "-o", "BatchMode=yes", "-p", str(self.port), "-l", self.user, "-i", str(self.key)]
        for k, v in self.options.items():
            argv += ["-o", f"{k}={v}"]
        return subprocess.run(
            argv + [self.host, command], check=False, capture_output=True, text=True, timeout=timeout
        )

    def logins(self) -> int:
        """Connections accepted so far (an sshd started with log_level INFO logs each)."""
        return self.log.read_text(errors="replace").count("Accepted publickey")

    def stop(self) -> None:
        """Kill sshd and every session it spawned (its process group), then reap it."""
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)


def start_sshd(
    tmp: Path,
    timeout: float = 20.0,
    *,
    listen: str = "127.0.0.1",
    port: int | None = None,
    enter: Callable[[list[str]], list[str]] | None = None,
    log_level: str = "ERROR",
) -> SSHServer:
    """Start sshd on LISTEN (a free loopback port by default) with keys under TMP; waits (up to TIMEOUT)
    until a login works. ENTER wraps sshd's argv to start it elsewhere, e.g. inside a namespaced host
    (tests/support/netns.py), whose own port space lets it listen on port 22. LOG_LEVEL INFO logs every
    connection (`Accepted publickey ...`: count them with `SSHServer.logins()`)."""
    tmp.mkdir(parents=True, exist_ok=True)
    host_key, client_key = tmp / "host_ed25519", tmp / "client_ed25519"
    for key in (host_key, client_key):
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True, timeout=30
        )
    authorized = tmp / "authorized_keys"
    authorized.write_text(client_key.with_suffix(".pub").read_text())
    authorized.chmod(0o600)
    port = port if port is not None else free_port()
    config = tmp / "sshd_config"
    config.write_text(
        "\n".join(
            [
                f"Port {port}",
                f"ListenAddress {listen}",
                f"HostKey {host_key}",
                f"PidFile {tmp / 'sshd.pid'}",
                f"AuthorizedKeysFile {authorized}",
                "PubkeyAuthentication yes",
                "PasswordAuthentication no",
                "KbdInteractiveAuthentication no",
                "UsePAM no",
                "StrictModes no",
                "PermitRootLogin yes",
                "AllowTcpForwarding no",
                "X11Forwarding no",
                "PrintMotd no",
                f"LogLevel {log_level}",
            ]
        )
        + "\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation dir, needed when sshd runs as root
    log = tmp / "sshd.log"
    with open(log, "wb") as log_fh:
        argv = [SSHD, "-D", "-e", "-f", str(config)]
        proc = subprocess.Popen(
            enter(argv) if enter else argv,
            stdout=log_fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = SSHServer(
        port=port,
        user=getpass.getuser(),
        key=client_key,
        proc=proc,
        log=log,
        options={
            "StrictHostKeyChecking": "no",
            "UserKnownHostsFile": "/dev/null",
            "IdentitiesOnly": "yes",
            "LogLevel": "ERROR",
        },
        host=listen,
    )
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with socket.create_connection((listen, port), timeout=1):
                pass
            done = server.run("true", timeout=10)
            if done.returncode == 0:
                return server
            last = done.stderr
        except OSError as exc:
            last = str(exc)
        time.sleep(0.2)
    server.stop()
    raise RuntimeError(f"sshd on port {port} did not accept a login within {timeout}s: {last}")
