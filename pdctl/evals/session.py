"""One `pdctl eval NAME` from options to verdict: where to send, what to ask, what to keep, then run — for any
eval (pdctl.evals.base.Eval: its data, prompt and scorer; pdctl.evals.registry.EVALS).

Why a module of its own: the CLI only parses options and renders, and the benchmark and tests drive the same
steps (resolve the target, load data, build prompts, pick up a results file, run, summarise) without a shell.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pdctl import runs
from pdctl.errors import UserError
from pdctl.evals.base import Eval, EvalData
from pdctl.evals.client import (
    API_PATHS,
    RANDOM_WEIGHTS_NOTE,
    RequestConfig,
    check_reachable,
    discover_model,
    serves_random_weights,
)
from pdctl.evals.defaults import eval_defaults
from pdctl.evals.results import ResultsWriter, request_key, resumable
from pdctl.evals.runner import Job, RunOutcome, run_jobs
from pdctl.evals.summary import summarize
from pdctl.liveness import Watchdog, require_alive
from pdctl.runs.lock import lock_pointer
from pdctl.runs.state import numerics_notes
from pdctl.target import target_from_state


@dataclass
class EvalOptions:
    """The command's options; None = take it from the topology's eval block or the built-in default."""

    url: str | None = None
    run_dir: str | None = None
    topology: str | None = None
    num_questions: int | None = None
    num_shots: int | None = None
    parallel: int | None = None
    max_new_tokens: int | None = None
    floor: float | None = None
    api: str = "generate"
    model: str | None = None
    data_file: str | None = None
    shots_file: str | None = None
    results: str | None = None
    resume: bool = False
    timeout_s: float = 600.0
    retries: int = 3
    max_errors: int | None = 0  # failed requests the verdict tolerates; None = any number
    deadline_s: float | None = None  # the whole eval's limit (--deadline); None = none


@dataclass
class PreparedEval:
    """Everything decided before the first request: the eval, the target, the settings, and the work left."""

    eval: Eval
    url: str
    settings: dict[str, Any]
    settings_source: str
    data: EvalData
    request: RequestConfig
    jobs: list[Job]
    kept: list[dict] = field(default_factory=list)
    results: Path | None = None
    max_errors: int | None = 0
    run_dir: Path | None = None  # the launched run evaluated (its processes are watched), None for a bare --url
    notes: list[str] = field(default_factory=list)  # what the reader of the accuracy must know
    deadline_s: float | None = None

    @property
    def num_questions(self) -> int:
        """How many questions the eval covers (kept from a resumed file + to ask now)."""
        return len(self.data.questions)


def _target(opts: EvalOptions) -> tuple[str, Path | None, dict[str, Any]]:
    """(URL to send to, run dir or None, its state): --url wins; else the router of --run-dir or the latest run."""
    run_dir: Path | None = None
    state: dict[str, Any] = {}
    if opts.run_dir is not None or opts.url is None:
        try:
            run_dir = runs.resolve_run_dir(opts.run_dir)
        except UserError as exc:
            if opts.url is None:
                raise UserError(f"{exc.message} (or pass --url URL of a server or router)") from exc
            raise
        state = runs.read_state(run_dir)
    url = opts.url or target_from_state(state, where=f"run {run_dir}").url  # the run's router (pdctl.target)
    if not url.startswith(("http://", "https://")):
        raise UserError(f"--url must start with http:// or https://, got {url!r}")
    return url.rstrip("/"), run_dir, state


def _positive(name: str, value: Any) -> int:
    if not isinstance(value, int) or value < 1:
        raise UserError(f"{name} must be a positive integer, got {value!r}")
    return value


def prepare(ev: Eval, opts: EvalOptions) -> PreparedEval:
    """EV as OPTS ask: resolve target and settings, load the eval's data, build its prompts, and (with
    --resume) drop what is already done.

    Raises UserError for bad options, unreadable data, or an unreachable URL.
    """
    if opts.api not in API_PATHS:
        raise UserError(f"--api must be one of {', '.join(API_PATHS)}, got {opts.api!r}")
    url, run_dir, state = _target(opts)
    require_alive(run_dir, f"eval {ev.name}")  # a dead worker is named now, not after every question failed
    defaults, source = eval_defaults(ev, opts.topology, run_dir, state)
    given = {"num_questions": opts.num_questions, "num_shots": opts.num_shots, "parallel": opts.parallel,
             "max_new_tokens": opts.max_new_tokens, "floor": opts.floor}
    settings = {k: (v if v is not None else defaults[k]) for k, v in given.items()}
    for name in ("num_questions", "parallel", "max_new_tokens"):
        _positive("--" + name.replace("_", "-"), settings[name])
    if opts.timeout_s <= 0 or opts.retries < 0:
        raise UserError("--timeout must be > 0 and --retries >= 0")
    results = Path(opts.results) if opts.results else (run_dir / "eval" / f"{ev.name}.jsonl" if run_dir else None)
    if opts.resume and results is None:
        raise UserError("--resume needs the results file to continue from: pass --results PATH")

    data = ev.load(data_file=opts.data_file, shots_file=opts.shots_file,
                   num_questions=settings["num_questions"], num_shots=settings["num_shots"])
    try:
        check_reachable(url)
    except UserError as exc:
        if opts.url is None and run_dir is not None:
            raise UserError(f"the router of run {run_dir} does not answer: {exc.message}; is the run up? "
                            "(`pdctl status`)") from exc
        raise
    notes = [RANDOM_WEIGHTS_NOTE] if serves_random_weights(url) else []
    model = opts.model or (discover_model(url) if opts.api != "generate" else None)
    request = RequestConfig(url=url, api=opts.api, max_new_tokens=settings["max_new_tokens"], model=model,
                            timeout_s=opts.timeout_s, retries=opts.retries, stop=ev.stop)
    jobs = [Job(item=item, prompt=prompt, key=request_key(prompt, opts.api, settings["max_new_tokens"]))
            for item, prompt in zip(data.questions, ev.prompts(data))]
    kept: dict[int, dict] = {}
    if opts.resume and results is not None:
        kept = resumable(results, {job.item.index: job.key for job in jobs})
    return PreparedEval(eval=ev, url=url, settings=settings, settings_source=source, data=data, request=request,
                        jobs=[j for j in jobs if j.item.index not in kept], kept=list(kept.values()),
                        results=results, max_errors=opts.max_errors, run_dir=run_dir, notes=notes,
                        deadline_s=opts.deadline_s)


def execute(prep: PreparedEval,
            on_record: Callable[[dict], None] | None = None) -> tuple[dict[str, Any], RunOutcome, list[dict]]:
    """Run the remaining jobs; return (verdict document, this run's outcome, all records in question order)."""
    writer = ResultsWriter(prep.results, keep=prep.kept)
    try:
        outcome = asyncio.run(run_jobs(prep.jobs, prep.request, prep.settings["parallel"], writer, prep.eval.score,
                                       on_record, watchdog=Watchdog(prep.run_dir), deadline_s=prep.deadline_s))
    finally:
        writer.close()
    order = {item.index: i for i, item in enumerate(prep.data.questions)}
    records = sorted(prep.kept + outcome.records, key=lambda r: order.get(r["index"], 0))
    summary = summarize(
        records,
        num_questions=prep.num_questions,
        floor=prep.settings["floor"],
        max_errors=prep.max_errors,
        wall_s=outcome.wall_s,
        new_completion_tokens=sum(int(r.get("completion_tokens") or 0) for r in outcome.records),
        interrupted=outcome.interrupted or outcome.dead is not None or outcome.deadline_passed,
        rates=prep.eval.rates,
    )
    if outcome.dead is not None:
        summary["ok"] = False
        summary["reasons"].insert(0, "stopped early: " + outcome.dead.summary())
        summary["dead"] = [d.describe() for d in outcome.dead.dead]
    elif outcome.deadline_passed:
        summary["ok"] = False
        summary["reasons"].insert(0, f"stopped at the deadline of {prep.deadline_s:g} s; every process of the "
                                     "deployment answers its health check")
    summary["deadline_passed"] = outcome.deadline_passed
    summary.update(
        lock=lock_pointer(prep.run_dir),  # the run's lock.json: what was evaluated (pdctl.runs.lock)
        url=prep.url,
        api=prep.request.api,
        num_shots=prep.settings["num_shots"],
        max_new_tokens=prep.settings["max_new_tokens"],
        parallel=prep.settings["parallel"],
        resumed=len(prep.kept),
        asked=len(outcome.records),
        data=prep.data.source,
        shots=prep.data.shots_source,
        settings_from=prep.settings_source,
        results=str(prep.results) if prep.results else None,
        notes=list(prep.notes),
        numerics_notes=numerics_notes(prep.run_dir),  # e.g. gpt-oss on a CPU node: not gpt-oss's numerics
    )
    return summary, outcome, records
