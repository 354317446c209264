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
import time
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
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-n:])
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
    port = port or free_port()
    log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="pdctl-ref-"))
    log_path = log_dir / f"reference-{role}-{port}.log"
    full_env = {**os.environ, **(env or {})}
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), full_env.get("PYTHONPATH")]))
    full_env.setdefault("OMP_NUM_THREADS", "1")
    cmd = reference_command(checkpoint, role=role, tp=tp, port=port, extra_args=extra_args)
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=str(REPO_ROOT),
                                start_new_session=True)
    server = RunningServer(f"http://127.0.0.1:{port}", port, proc, log_path)
    try:
        try:
            wait_http_ok(server.url + "/health", timeout=timeout, proc=proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"reference server did not start: {exc}\n--- log ---\n{server.log_tail()}") from exc
        yield server
    finally:
        kill_group(proc)


def wait_exit(proc: subprocess.Popen, timeout: float) -> int | None:
    """Wait up to TIMEOUT seconds for PROC to exit; its return code, or None if still running."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return proc.returncode
        time.sleep(0.05)
    return None
