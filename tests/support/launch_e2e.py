"""Shared steps of the end-to-end launch tests: one real deployment per test module."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import requests


def pdctl(*args: str, cwd: Path, timeout: float = 120, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run the real CLI in a subprocess (exit codes and output as a user sees them); ENV: its environment
    (default: this one)."""
    return subprocess.run(
        [sys.executable, "-m", "pdctl", *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
    )


@contextmanager
def detached_run(tmp: Path, topology: Path, *flags: str) -> Iterator[dict]:
    """`pdctl launch TOPOLOGY --detach [FLAGS]` into TMP/run; yields {tmp, run_dir, state (launch's JSON)};
    always `pdctl down` afterwards."""
    run_dir = tmp / "run"
    try:
        done = pdctl("launch", str(topology), "--detach", "--skip-preflight", *flags, "--run-dir", str(run_dir),
                     "--timeout", "240", "--json", "-", cwd=tmp, timeout=400)
        assert done.returncode == 0, done.stderr[-3000:]
        yield {"tmp": tmp, "run_dir": run_dir, "state": json.loads(done.stdout)}
    finally:
        if (run_dir / "state.json").exists():
            pdctl("down", "--run-dir", str(run_dir), cwd=tmp, timeout=120)


def run_records(run_dir: Path) -> list[dict]:
    """Every process with a pid in the run's state.json (workers and router); [] when there is none."""
    try:
        state = json.loads((run_dir / "state.json").read_text())
    except (OSError, ValueError):
        return []
    return [r for r in [*state["processes"], state.get("router") or {}] if r.get("pid")]


def record(dep: dict, name: str) -> dict:
    """The state record of process NAME (e.g. "prefill-0", "router") of DEP's run (DEP["run_dir"])."""
    return next(r for r in run_records(dep["run_dir"]) if r["name"] == name)


def resume_and_down(run_dir: Path, cwd: Path) -> None:
    """A fault suite's teardown: SIGCONT every recorded process group (a failed case must not leave a stopped
    process behind: `pdctl down` would wait on it), then `pdctl down` the run if it has a state.json."""
    for record in run_records(run_dir):
        try:
            os.killpg(int(record["pgid"]), signal.SIGCONT)
        except (OSError, TypeError, ValueError):
            pass
    if (run_dir / "state.json").exists():
        pdctl("down", "--run-dir", str(run_dir), cwd=cwd, timeout=120)


def wait_state(run_dir: Path, status: str, timeout: float, proc: subprocess.Popen | None = None) -> dict:
    """Wait until the run's state.json says STATUS (fail early if PROC, the launcher, exits)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        path = run_dir / "state.json"
        if path.exists():
            state = json.loads(path.read_text())
            if state.get("status") == status:
                return state
        if proc is not None and proc.poll() is not None:
            raise AssertionError(
                f"launcher exited with {proc.returncode}: {proc.stderr.read() if proc.stderr else ''}"
            )
        time.sleep(0.2)
    raise AssertionError(f"{run_dir} not {status!r} after {timeout}s")


def generate(router_url: str, text: str = "The capital of France is", max_new_tokens: int = 4) -> dict:
    """POST /generate through the router (PD: prefill + decode behind it)."""
    response = requests.post(
        router_url + "/generate",
        timeout=120,
        json={"text": text, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0.0}},
    )
    assert response.status_code == 200, response.text
    return response.json()
