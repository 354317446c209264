"""Start real reference-engine servers in tests: own process group, health wait with timeout, sure teardown.

    with start_reference_server(ref_checkpoint, tp=2) as srv:
        requests.post(srv.url + "/generate", json={...})

No port races: every server binds port 0 (HTTP, and a prefill's bootstrap port) and reports the ports it
bound through `--port-file`; `srv.url`/`srv.port`/`srv.bootstrap_port` are known once `wait_healthy` returned.
The server's stdout/stderr go to `srv.log_path`; on a failed start the log tail is in the exception.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.net import wait_http_ok
from tests.support.paths import REPO as REPO_ROOT


@dataclass
class RunningServer:
    """A started reference server; `url`, `port` and `bootstrap_port` are set by `wait_ready`/`wait_healthy`."""

    proc: subprocess.Popen
    log_path: Path
    port_file: Path
    url: str = ""
    port: int = 0
    bootstrap_port: int | None = None

    def log_tail(self, n: int = 40) -> str:
        """Last N lines of the server log (for assertion messages)."""
        return log_tail(self.log_path, n)

    def wait_ready(self, timeout: float) -> None:
        """Wait for the port file (written once the server serves); fails at once if the process dies."""
        deadline = time.monotonic() + timeout
        while not self.port_file.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                state = f"exited with {self.proc.returncode}" if self.proc.poll() is not None else f"not up after {timeout}s"
                raise RuntimeError(f"reference server {state}\n--- log ---\n{self.log_tail()}")
            time.sleep(0.05)
        ports = json.loads(self.port_file.read_text())
        self.port, self.bootstrap_port = int(ports["port"]), ports.get("bootstrap_port")
        self.url = f"http://127.0.0.1:{self.port}"

    def wait_healthy(self, timeout: float) -> None:
        """Wait for the port file, then GET /health; fails at once if the process dies, with its log tail."""
        deadline = time.monotonic() + timeout
        self.wait_ready(timeout)
        try:
            wait_http_ok(self.url + "/health", timeout=max(1.0, deadline - time.monotonic()), proc=self.proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"reference server did not start: {exc}\n--- log ---\n{self.log_tail()}") from exc


def log_tail(path: Path, n: int) -> str:
    """Last N lines of the log at PATH ("" if it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def reference_command(
    checkpoint: str | Path, *, role: str, tp: int, port_file: Path, extra_args: Sequence[str] = (),
    python: str | None = None,
) -> list[str]:
    """The argv that starts a reference server on port 0 (same flags pdctl's launch renders); a prefill's
    bootstrap port is 0 too unless EXTRA_ARGS name one. The bound ports are written to PORT_FILE. PYTHON:
    another interpreter (SGLang's, for `--transfer-stack sglang`; pdctl comes through PYTHONPATH)."""
    argv = [
        python or sys.executable, "-m", "pdctl.reference", "--model-path", str(checkpoint), "--role", role,
        "--tp", str(tp), "--host", "127.0.0.1", "--port", "0", "--port-file", str(port_file),
    ]
    if "--disaggregation-bootstrap-port" not in extra_args:
        argv += ["--disaggregation-bootstrap-port", "0"]
    return argv + list(extra_args)


def kill_group(proc: subprocess.Popen, timeout: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL it if it has not exited after TIMEOUT seconds."""
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=timeout)


@contextmanager
def start_reference_server(
    checkpoint: str | Path,
    *,
    role: str = "colocated",
    tp: int = 1,
    extra_args: Sequence[str] = (),
    env: dict[str, str] | None = None,
    timeout: float = 90.0,
    log_dir: str | Path | None = None,
) -> Iterator[RunningServer]:
    """Run `python -m pdctl.reference` in its own process group until the block exits (always killed).

    Waits for GET /health (TIMEOUT seconds; fails at once if the process dies, with its log tail).
    """
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-ref-"))
    server = spawn_reference(checkpoint, role=role, tp=tp, extra_args=extra_args, log_dir=log_dir, env=env)
    try:
        server.wait_healthy(timeout)
        yield server
    finally:
        kill_group(server.proc)


def spawn_reference(
    checkpoint: str | Path,
    *,
    role: str,
    tp: int,
    extra_args: Sequence[str],
    log_dir: Path,
    env: dict[str, str] | None = None,
    python: str | None = None,
) -> RunningServer:
    """Start (not wait for) a reference server in its own process group, output to a log in LOG_DIR.

    The caller owns the process: it must `kill_group` it (start_reference_server / start_servers do)."""
    stem = tempfile.mktemp(prefix=f"reference-{role}-", dir=log_dir)  # a unique name; the files are ours
    log_path, port_file = Path(stem + ".log"), Path(stem + ".ports.json")
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    full_env.setdefault("OMP_NUM_THREADS", "1")
    cmd = reference_command(checkpoint, role=role, tp=tp, port_file=port_file, extra_args=extra_args, python=python)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=str(REPO_ROOT),
                                start_new_session=True)
    return RunningServer(proc, log_path, port_file)


def wait_exit(proc: subprocess.Popen, timeout: float) -> int | None:
    """Wait up to TIMEOUT seconds for PROC to exit; its return code, or None if still running."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


@pytest.fixture(scope="module")
def server(ref_checkpoint):
    """A colocated reference server (context 1024) over real HTTP, shared by a module's tests (re-exported by
    tests/reference/conftest.py)."""
    with start_reference_server(ref_checkpoint, extra_args=["--context-length", "1024"]) as srv:
        yield srv
