"""The load generator: SGLang's own serving benchmark (`sglang.benchmark.serving`), run from SGLang's interpreter.

Why this tool (docs/bench-serve.md has the measurements): it is what SGLang users already trust and quote, it
speaks SGLang's native streaming /generate (token ids in, server-counted tokens out, so pdctl can check counts
exactly) and the OpenAI endpoints, it drove the most requests/s per client CPU second of the tools measured on
this machine, and its timings matched a timing-oracle server's. It needs SGLang's Python environment, which pdctl
must not share (CUDA/torch pins): `--tool-python` (or PDCTL_SGLANG_PYTHON, or ./.venv-sglang built by
`make sglang-env`) names that interpreter; pdctl runs sglang_driver.py in it, one process per deployment.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.bench.serve import servercounts
from pdctl.bench.serve.datasets import Dataset
from pdctl.bench.serve.levelwatch import LevelWatch
from pdctl.bench.serve.metrics import PointMetrics, from_tool_result
from pdctl.bench.serve.sweep import APIS, Point, SweepSpec
from pdctl.errors import UserError

DRIVER = Path(__file__).with_name("sglang_driver.py")
ENV_VAR = "PDCTL_SGLANG_PYTHON"
MARK = "PDCTL-POINT "
READY = "PDCTL-READY "
PROBE = ("import importlib.metadata as m, importlib.util as u; "
         "assert u.find_spec('sglang.benchmark.serving'); print(m.version('sglang'))")


@dataclass(frozen=True)
class Tool:
    """An interpreter that has SGLang's benchmark, and its version."""

    python: str
    version: str

    @property
    def name(self) -> str:
        return f"sglang.bench_serving {self.version}"


def find_tool(explicit: str | None) -> Tool:
    """The interpreter to run the tool with: EXPLICIT, else $PDCTL_SGLANG_PYTHON, else ./.venv-sglang, else this
    interpreter; UserError (exit 2) when none has SGLang."""
    checkout = Path(__file__).resolve().parents[3] / ".venv-sglang" / "bin" / "python"  # an editable install's
    candidates = [explicit] if explicit else [os.environ.get(ENV_VAR), ".venv-sglang/bin/python", str(checkout),
                                              sys.executable]
    tried = []
    for python in [c for c in candidates if c]:
        if not Path(python).exists():
            tried.append(f"{python} (missing)")
            continue
        try:
            probe = subprocess.run([python, "-c", PROBE], capture_output=True, text=True, timeout=120, check=False)
        except (OSError, subprocess.TimeoutExpired) as exc:
            tried.append(f"{python} ({type(exc).__name__})")
            continue
        if probe.returncode == 0 and probe.stdout.strip():
            return Tool(os.path.abspath(python), probe.stdout.strip().splitlines()[-1])
        tried.append(f"{python} (no sglang.benchmark.serving)")
    raise UserError("SGLang's serving benchmark was not found: " + "; ".join(tried),
                    detail="fix: run `make sglang-env` (builds ./.venv-sglang, ~2.6 GB, ~80 s), or pass "
                    "--tool-python PYTHON with sglang>=0.5.23 importable")


def point_argv(point: Point, spec: SweepSpec, dataset: Dataset, url: str, tokenizer: str, out: Path) -> list[str]:
    """The tool's command line for POINT (its own flags: `python -m sglang.bench_serving --help`)."""
    argv = [
        "--backend", APIS[spec.api], "--base-url", url, "--tokenizer", tokenizer,
        "--dataset-name", dataset.tool_dataset, "--random-input-len", str(point.isl),
        "--random-output-len", str(point.osl), "--random-range-ratio", "1.0",
        "--num-prompts", str(point.requests), "--max-concurrency", str(point.concurrency),
        "--request-rate", "inf" if spec.request_rate is None else str(spec.request_rate),
        "--warmup-requests", str(spec.warmup), "--seed", str(spec.seed), "--output-file", str(out),
        "--output-details", "--disable-tqdm", "--ready-check-timeout-sec", "30",
    ]
    if dataset.path is not None:
        argv += ["--dataset-path", str(dataset.path)]
    if spec.api == "generate":
        argv.append("--tokenize-prompt")  # token ids: every prompt is exactly isl tokens
    return argv


def _last_json_line(path: Path) -> dict[str, Any] | None:
    try:
        lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip()]
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def run_sweep(tool: Tool, url: str, points: list[Point], spec: SweepSpec, dataset: Dataset, tokenizer: str,
              work_dir: Path, *, gpus: int | None, timeout_s: float, count_urls: tuple[str, ...] = (),
              servers: tuple[tuple[str, str], ...] = (), router_metrics: str | None = None,
              on_point: Callable[[PointMetrics], None] = lambda _m: None,
              stop_when: Callable[[], Exception | None] | None = None) -> list[PointMetrics]:
    """Every point against URL, in one tool process; ON_POINT sees each point's metrics as it finishes.

    The tool's own output goes to WORK_DIR/tool.log. A point the tool produced no result for (every request
    failed, the process died, TIMEOUT_S passed) is all errors, with the reason from the log. STOP_WHEN, asked
    every LOOK_S while the tool runs (pdctl.liveness: a hung or dead process, the command's deadline): the
    exception it returns stops the tool at once and is raised. COUNT_URLS: the servers whose own counters are
    read before and after every point (pdctl.bench.serve.servercounts; the driver waits for pdctl's go).
    SERVERS ((role, URL)) and ROUTER_METRICS are sampled while each point runs for its bottleneck verdict
    (pdctl.bench.serve.levelwatch)."""
    work_dir.mkdir(parents=True, exist_ok=True)
    outs = {p.index: work_dir / f"point-{p.index}.jsonl" for p in points}
    for out in outs.values():  # the tool appends: a reused --work-dir must not hand back an older run's result
        out.unlink(missing_ok=True)
    plan = {"points": [{"index": p.index, "argv": point_argv(p, spec, dataset, url, tokenizer, outs[p.index]),
                        "warmup": spec.warmup} for p in points]}
    (work_dir / "plan.json").write_text(json.dumps(plan, indent=1), encoding="utf-8")
    log = work_dir / "tool.log"
    results: dict[int, PointMetrics] = {}
    by_index = {p.index: p for p in points}
    exact = spec.api == "generate"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
           "PYTHONUNBUFFERED": "1"}
    with open(log, "w", encoding="utf-8") as log_f:
        proc = subprocess.Popen([tool.python, str(DRIVER), str(work_dir / "plan.json")], stdout=subprocess.PIPE,
                                stdin=subprocess.PIPE, stderr=log_f, text=True, env=env, start_new_session=True)
        timer = threading.Timer(timeout_s, lambda: _kill(proc))
        timer.start()
        halt = threading.Event()
        stopped: list[Exception] = []

        def look() -> None:
            while stop_when is not None and not halt.wait(LOOK_S) and proc.poll() is None:
                why = stop_when()
                if why is not None:
                    stopped.append(why)
                    _kill(proc)
                    return

        looker = threading.Thread(target=look, name="bench-serve-look", daemon=True)
        looker.start()
        try:
            assert proc.stdout is not None and proc.stdin is not None
            before: servercounts.Counts | str = "not read"
            level = LevelWatch(servers, router_metrics)
            for line in proc.stdout:
                if line.startswith(READY):
                    before = servercounts.read(count_urls)
                    level = LevelWatch(servers, router_metrics)
                    level.start()
                    try:
                        proc.stdin.write("go\n")
                        proc.stdin.flush()
                    except OSError:  # the driver died: its missing points are reported below
                        pass
                    continue
                if not line.startswith(MARK):
                    continue
                status = json.loads(line[len(MARK):])
                verdict = level.stop()
                point = by_index[status["index"]]
                result = _last_json_line(outs[point.index]) if status["ok"] else None
                client = status.get("client")
                metrics = from_tool_result(point, result, exact_counts=exact, gpus=gpus,
                                           failure=status.get("error"), client=client,
                                           server=_server_counts(count_urls, before, result, client))
                metrics.bottleneck = verdict
                results[point.index] = metrics
                on_point(metrics)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass  # its output is closed and every point reported: killed below
        finally:
            level.stop()
            timer.cancel()
            halt.set()
            _kill(proc)
            looker.join(timeout=60)
    if stopped:
        raise stopped[0]
    for point in points:  # the tool died (or timed out) before these
        if point.index not in results:
            why = f"the tool stopped before this point (exit {proc.returncode}); log {log}: {_tail(log)}"
            results[point.index] = from_tool_result(point, None, exact_counts=exact, gpus=gpus, failure=why)
            on_point(results[point.index])
    return [results[p.index] for p in points]


LOOK_S = 2.0  # how often a running sweep asks STOP_WHEN


def _server_counts(urls: tuple[str, ...], before: servercounts.Counts | str, result: dict[str, Any] | None,
                   client: dict[str, Any] | None) -> dict[str, Any]:
    """The `server` document of a point: the servers' counters' growth over it, or why it was not read."""
    if isinstance(before, str):
        return {"checked": False, "why": before, "servers": list(urls)}
    expected = int((result or {}).get("completed") or 0) + int(((client or {}).get("warmup") or {}).get("ok") or 0)
    after = servercounts.settled(urls, before, expected)
    if isinstance(after, str):
        return {"checked": False, "why": after, "servers": list(urls)}
    return {"checked": True, "delta": after.minus(before), "servers": list(urls)}


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)


def _tail(path: Path, lines: int = 5) -> str:
    try:
        return " | ".join(path.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
