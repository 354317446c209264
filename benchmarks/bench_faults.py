"""A decode stopped (SIGSTOP) during `pdctl eval gsm8k`, then resumed (SIGCONT): how long until the eval names
it, and how long until the deployment serves again — with sglang-router 0.3.2's own health-check and
circuit-breaker defaults ("router defaults"; BENCH_FAULTS_BEFORE_PYTHON: run that side's pdctl commands with
another checkout's interpreter, e.g. the tree before hang detection) and with the settings pdctl renders (pdctl.render.router.
RECOVERY_FLAGS), side by side in one run on the local CPU topology (reference prefill TP2 -> decode TP1, NIXL).

Printed per side: the eval's exit code and wall time after the stop, its first error line, the seconds from
SIGCONT to the first request served through the router, and the errors of a 10-question eval right after.
Numbers go to docs/troubleshooting.md#recovery. Environment: BENCH_FAULTS_CAP (seconds an eval may run after
the stop before it is killed, default 240), BENCH_FAULTS_HOLD (seconds the decode stays stopped on both sides,
so that both routers see the same outage, default 90). Run alone: `python -m benchmarks.bench_faults`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
SGLANG_ROUTER_DEFAULTS = {"health-check-interval-secs": 60, "health-check-timeout-secs": 5,
                          "health-failure-threshold": 3, "health-success-threshold": 2,
                          "cb-timeout-duration-secs": 60, "cb-success-threshold": 3, "retry-max-backoff-ms": 30000}


def _pdctl(*args: str, cwd: Path, timeout: float = 600, python: str = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "pdctl", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, check=False)


def _lines(path: Path) -> int:
    try:
        return sum(1 for line in path.read_text().splitlines() if line.strip())
    except OSError:
        return 0


def _eval_args(results: Path, n: int) -> list[str]:
    return ["eval", "gsm8k", "--data-file", str(DATA / "gsm8k_test_50.jsonl"), "--num-questions", str(n),
            "--num-shots", "2", "--max-new-tokens", "32", "--parallel", "2", "--results", str(results)]


def one_side(tmp: Path, checkpoint: Path, label: str, router_args: dict, cap: float, python: str,
             hold: float = 0.0) -> dict:
    """Launch, eval, stop decode, wait for the eval, resume decode, time the first served request (every pdctl
    command run by PYTHON: another checkout's interpreter measures that pdctl)."""
    from tests.support.launch_samples import local_cpu

    work = tmp / label
    work.mkdir()
    topo = local_cpu(work, checkpoint, name=f"faults-{label}", router={"args": router_args})
    run_dir = work / "run"
    done = _pdctl("launch", str(topo), "--detach", "--skip-preflight", "--run-dir", str(run_dir), "--timeout", "180",
                  cwd=work, python=python)
    if done.returncode != 0:
        raise RuntimeError(f"launch failed: {done.stderr[-2000:]}")
    row: dict = {"side": label}
    try:
        state = json.loads((run_dir / "state.json").read_text())
        decode = next(p for p in state["processes"] if p["role"] == "decode")
        router = state["router"]["url"]
        results = work / "gsm8k.jsonl"
        proc = subprocess.Popen([python, "-m", "pdctl", *_eval_args(results, 50), "--run-dir",
                                 str(run_dir)], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        while _lines(results) < 2 and proc.poll() is None:
            time.sleep(0.2)
        os.kill(decode["pid"], signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            out, err = proc.communicate(timeout=cap)
            row["eval_exit"] = proc.returncode
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            row["eval_exit"] = f"still running at {cap:g} s (killed)"
        row["detected_after_s"] = round(time.monotonic() - stopped, 1)
        flat = " ".join((out + err).split())
        row["message"] = next((m for m in ("is hung", "exited", "No available", "timed out") if m in flat), flat[-200:])
        row["answered_before"] = _lines(results)
        while time.monotonic() - stopped < hold:  # the same outage on both sides, however fast the eval ended
            time.sleep(0.5)
        os.kill(decode["pid"], signal.SIGCONT)
        resumed = time.monotonic()
        served = None
        while time.monotonic() - resumed < 300:
            try:
                r = requests.post(router + "/generate", timeout=10, json={
                    "text": "2 + 2 =", "sampling_params": {"max_new_tokens": 2, "temperature": 0}})
                if r.status_code == 200:
                    served = time.monotonic() - resumed
                    break
            except requests.RequestException:
                pass
            time.sleep(0.5)
        row["first_served_after_cont_s"] = None if served is None else round(served, 1)
        again = work / "again.jsonl"
        second = _pdctl(*_eval_args(again, 10), "--run-dir", str(run_dir), "--max-errors", "-1", cwd=work,
                        timeout=300, python=python)
        row["next_eval_exit"] = second.returncode
        row["next_eval_errors"] = sum(1 for line in again.read_text().splitlines() if json.loads(line).get("error"))
        row["next_eval_done_after_cont_s"] = round(time.monotonic() - resumed, 1)
    finally:
        for p in json.loads((run_dir / "state.json").read_text())["processes"]:
            if p.get("pid"):
                try:
                    os.killpg(p["pgid"], signal.SIGCONT)
                except OSError:
                    pass
        _pdctl("down", "--run-dir", str(run_dir), cwd=work, timeout=120, python=python)
    return row


def main() -> int:
    from pdctl.reference.checkpoint import init_checkpoint
    from pdctl.render.router import RECOVERY_FLAGS

    cap = float(os.environ.get("BENCH_FAULTS_CAP", "240"))
    before = os.environ.get("BENCH_FAULTS_BEFORE_PYTHON", sys.executable)
    hold = float(os.environ.get("BENCH_FAULTS_HOLD", "90"))
    with tempfile.TemporaryDirectory(prefix="pdctl-bench-faults-") as raw:
        tmp = Path(raw)
        checkpoint = init_checkpoint(tmp / "ckpt", seed=0)
        rows = [one_side(tmp, checkpoint, "router-defaults", SGLANG_ROUTER_DEFAULTS, cap, before, hold),
                one_side(tmp, checkpoint, "pdctl", dict(RECOVERY_FLAGS), cap, sys.executable, hold)]
    for row in rows:
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
