"""Start real reference-engine servers in tests: own process group, health wait with timeout, sure teardown.

    with start_reference_server(ref_checkpoint, tp=2) as srv:
        requests.post(srv.url + "/generate", json={...})

The server's stdout/stderr go to `srv.log_path`; on a failed start the log tail is in the exception.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.net import free_port, wait_http_ok

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class RunningServer:
    """A started reference server."""

    url: str
    port: int
    proc: subprocess.Popen
    log_path: Path

    def log_tail(self, n: int = 40) -> str:
        """Last N lines of the server log (for assertion messages)."""
        return log_tail(self.log_path, n)

    def wait_healthy(self, timeout: float) -> None:
        """Wait for GET /health; fails at once if the process dies, with the log tail in the message."""
        try:
            wait_http_ok(self.url + "/health", timeout=timeout, proc=self.proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"reference server did not start: {exc}\n--- log ---\n{self.log_tail()}") from exc


def log_tail(path: Path, n: int) -> str:
    """Last N lines of the log at PATH ("" if it cannot be read)."""
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-n:])
    except OSError:
        return ""


def reference_command(checkpoint: str | Path, *, role: str, tp: int, port: int, extra_args: Sequence[str] = ()) -> list[str]:
    """The argv that starts a reference server (same flags pdctl's launch renders)."""
    return [
        sys.executable, "-m", "pdctl.reference", "--model-path", str(checkpoint), "--role", role,
        "--tp", str(tp), "--host", "127.0.0.1", "--port", str(port), *extra_args,
    ]


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
    port: int | None = None,
    env: dict[str, str] | None = None,
    timeout: float = 90.0,
    log_dir: str | Path | None = None,
) -> Iterator[RunningServer]:
    """Run `python -m pdctl.reference` in its own process group until the block exits (always killed).

    Waits for GET /health (TIMEOUT seconds; fails at once if the process dies, with its log tail).
    """
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-ref-"))
    server = spawn_reference(checkpoint, role=role, tp=tp, port=port or free_port(), extra_args=extra_args,
                             log_dir=log_dir, env=env)
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
    port: int,
    extra_args: Sequence[str],
    log_dir: Path,
    env: dict[str, str] | None = None,
) -> RunningServer:
    """Start (not wait for) a reference server in its own process group, output to a log in LOG_DIR.

    The caller owns the process: it must `kill_group` it (start_reference_server / start_servers do)."""
    log_path = log_dir / f"reference-{role}-{port}.log"
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    full_env.setdefault("OMP_NUM_THREADS", "1")
    cmd = reference_command(checkpoint, role=role, tp=tp, port=port, extra_args=extra_args)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=str(REPO_ROOT),
                                start_new_session=True)
    return RunningServer(f"http://127.0.0.1:{port}", port, proc, log_path)


def wait_exit(proc: subprocess.Popen, timeout: float) -> int | None:
    """Wait up to TIMEOUT seconds for PROC to exit; its return code, or None if still running."""
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
