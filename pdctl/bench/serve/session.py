"""From command-line choices to a finished `pdctl bench serve` run: deployments, sweep, tool, comparison.

The CLI only parses and renders; this glue — which deployment is which, where defaults come from, launching and
tearing down the control, one tool process per deployment — is what tests exercise directly.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl.bench.serve import datasets, targets
from pdctl.bench.serve.compare import gate, parse_metrics, parse_percent
from pdctl.bench.serve.metrics import PointMetrics
from pdctl.bench.serve.results import BenchResult
from pdctl.bench.serve.sweep import build_spec
from pdctl.bench.serve.targets import Side
from pdctl.bench.serve.tool import find_tool, run_sweep
from pdctl.errors import UserError
from pdctl.liveness import Watchdog, deadline_error

MAX_WAIT_S = 7 * 24 * 3600  # a week: longer is a typo (and overflows the timers)


@dataclass
class BenchRequest:
    """Everything the user asked for on the command line (None = not given: topology default or built-in)."""

    url: str | None = None
    run_dir: str | None = None
    topology: str | None = None
    control_url: str | None = None
    control_topology: str | None = None
    concurrency: tuple[int, ...] | None = None
    isl: tuple[int, ...] | None = None
    osl: tuple[int, ...] | None = None
    dataset: str | None = None
    num_prompts: int | None = None
    warmup: int | None = None
    seed: int | None = None
    api: str = "generate"
    request_rate: float | None = None
    max_regression: str | float | None = None
    gate_metrics: str | None = None
    gpus: int | None = None
    control_gpus: int | None = None
    tokenizer: str | None = None
    tool_python: str | None = None
    work_dir: str | None = None
    launch_timeout: float = 600.0
    timeout: float = 3600.0
    deadline_s: float | None = None  # the whole command's limit (--deadline)
    extra: dict[str, Any] = field(default_factory=dict)

    def validate(self) -> None:
        """Contradictory options are bad input (exit 2), before anything is contacted."""
        if self.url is not None and self.run_dir is not None:
            raise UserError("give either --url URL or --run-dir DIR, not both")
        if self.topology is not None and self.url is None:
            raise UserError("--topology goes with --url (a run dir brings its own topology)")
        if self.control_url is not None and self.control_topology is not None:
            raise UserError("give either --control-url URL or --control-topology FILE, not both")
        if self.max_regression is not None and self.control_url is None and self.control_topology is None:
            raise UserError("--max-regression compares against a control: give --control-url or --control-topology")
        for name in ("gpus", "control_gpus"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise UserError(f"--{name.replace('_', '-')} must be at least 1, got {value}")
        for name in ("timeout", "launch_timeout"):
            value = getattr(self, name)
            if not 0 < value <= MAX_WAIT_S:
                raise UserError(f"--{name.replace('_', '-')} must be a number of seconds in (0, {MAX_WAIT_S}], "
                                f"got {value}")
        # what the command line alone decides is checked here too, before any server is contacted
        if self.num_prompts is not None and self.num_prompts < 1:
            raise UserError(f"--num-prompts must be at least 1, got {self.num_prompts}")
        if self.warmup is not None and self.warmup < 0:
            raise UserError(f"--warmup must be 0 or more, got {self.warmup}")
        if self.request_rate is not None and not self.request_rate > 0:
            raise UserError(f"--request-rate must be a positive number, got {self.request_rate}")
        if self.isl is not None and min(self.isl) < 2:
            raise UserError("--isl: prompts need at least 2 tokens")
        if self.dataset not in (None, "random", "gsm8k") and not Path(self.dataset).is_file():
            raise UserError(f"--dataset {self.dataset}: not 'random', 'gsm8k' or an existing JSONL file")
        if self.gate_metrics is not None:
            parse_metrics(self.gate_metrics)
        parse_percent(self.max_regression)


@dataclass(frozen=True)
class ProgressUpdate:
    """Where the run is: PHASE "setup" (DETAIL says what) or a deployment label with points DONE of TOTAL."""

    phase: str
    done: int
    total: int
    detail: str = ""
    metrics: PointMetrics | None = None


Progress = Callable[[ProgressUpdate], None]


@contextlib.contextmanager
def _work_dir(explicit: str | None) -> Iterator[Path]:
    """The run's scratch dir (plans, the tool's outputs and log): EXPLICIT (kept), or a temp dir removed after."""
    if explicit:
        path = Path(explicit)
        path.mkdir(parents=True, exist_ok=True)
        yield path
        return
    path = Path(tempfile.mkdtemp(prefix="pdctl-bench-serve-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@contextlib.contextmanager
def _control(req: BenchRequest) -> Iterator[Side | None]:
    if req.control_url is not None:
        yield targets.from_url("control", req.control_url, req.control_gpus)
    elif req.control_topology is not None:
        with targets.launched_control(req.control_topology, timeout=req.launch_timeout, gpus=req.control_gpus) as d:
            yield d
    else:
        yield None


def run_request(req: BenchRequest, progress: Progress | None = None) -> BenchResult:
    """Do the whole run; a launched control is torn down before returning."""
    req.validate()
    end = None if req.deadline_s is None else time.monotonic() + req.deadline_s
    say = progress or (lambda _u: None)
    max_regression = parse_percent(req.max_regression)
    say(ProgressUpdate("setup", 0, 0, "checking the candidate"))
    if req.url is not None:
        candidate = targets.from_url("candidate", req.url, req.gpus)
    else:
        candidate = targets.from_run_dir(req.run_dir, req.gpus)
    if req.topology is not None:
        candidate = targets.with_topology(candidate, req.topology, req.gpus)
    defaults = candidate.topology.bench.serve if candidate.topology is not None else None
    spec = build_spec(defaults, concurrency=req.concurrency, isl=req.isl, osl=req.osl, dataset=req.dataset,
                      num_prompts=req.num_prompts, warmup=req.warmup, seed=req.seed, api=req.api,
                      request_rate=req.request_rate)
    metrics = parse_metrics(req.gate_metrics or (defaults.gate_metrics if defaults else
                                                 "output_tok_s,ttft_ms.p50,itl_ms.p50"))
    if max_regression is None and defaults is not None and (req.control_url or req.control_topology):
        max_regression = defaults.max_regression
    say(ProgressUpdate("setup", 0, 0, "finding SGLang's serving benchmark"))
    tool = find_tool(req.tool_python)
    points = spec.points()
    with _work_dir(req.work_dir) as work:
        dataset = datasets.prepare(spec.dataset, work, records=max(p.requests for p in points) + spec.warmup)
        tokenizer = targets.tokenizer_for(candidate.url, req.tokenizer, work)
        if req.control_topology:
            say(ProgressUpdate("setup", 0, 0, f"launching the control topology {req.control_topology}"))
        with _control(req) as control:

            def sweep(side: Side) -> list[PointMetrics]:
                done: list[PointMetrics] = []
                watchdog = Watchdog(side.run_dir, recheck_s=0)

                def stop_when() -> Exception | None:
                    """A hung or dead process of the side's run, or the deadline: stop the tool now."""
                    if end is not None and req.deadline_s is not None and time.monotonic() >= end:
                        return deadline_error(f"bench serve ({side.label} sweep)", req.deadline_s,
                                              watchdog.last_look())
                    found = watchdog.dead()
                    return found.error(f"bench serve stopped during the {side.label} sweep") if found else None

                def on_point(m: PointMetrics) -> None:
                    done.append(m)
                    say(ProgressUpdate(side.label, len(done), len(points), metrics=m))
                    found = watchdog.dead() if m.errors else None
                    if found is not None:  # the rest of the sweep would only fail against the dead process
                        raise found.error(f"bench serve stopped at {side.label} point c={m.point.concurrency} "
                                          f"isl={m.point.isl} osl={m.point.osl} ({m.errors} failed requests)")

                say(ProgressUpdate(side.label, 0, len(points), f"{side.url}"))
                return run_sweep(tool, side.url, points, spec, dataset, tokenizer, work / side.label,
                                 gpus=side.gpus, timeout_s=req.timeout, on_point=on_point, stop_when=stop_when,
                                 count_urls=side.count_urls, servers=side.servers,
                                 router_metrics=side.router_metrics)

            result = BenchResult(tool=tool.name, spec=spec, dataset=dataset.name, candidate=candidate,
                                 points=sweep(candidate), gate_metrics=metrics, max_regression=max_regression,
                                 predicted=candidate.topology.bench.predicted if candidate.topology else None)
            if control is not None:
                result.control = control
                result.control_points = sweep(control)
    if result.control_points is not None and max_regression is not None:
        result.gate_failures = gate(result.pairs(), metrics, max_regression)
    return result
