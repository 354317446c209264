"""`pdctl eval gsm8k` (an eval of pdctl.evals.registry): options and printing only; the work is in
pdctl.evals.session."""

from __future__ import annotations

import sys
from typing import Any

import click

from pdctl.cli.console import console, err_console, print_error, write_json
from pdctl.cli.options import FiniteFloatRange, deadline_option, json_option, writable
from pdctl.clip import clip
from pdctl.errors import CheckFailed

EXIT_INTERRUPTED = 130


@click.group("eval")
def eval_group() -> None:
    """Accuracy evals against a running deployment (a server URL or a launched run's router)."""


@eval_group.command("gsm8k")
@click.option("--url", help="Server or router to evaluate (http://host:port). Default: the run's router.")
@click.option("--run-dir", type=click.Path(file_okay=False), help="Run dir of `pdctl launch` (default: latest).")
@click.option("--topology", type=click.Path(dir_okay=False), help="Take defaults from this topology's eval block.")
@click.option("--num-questions", type=int, help="Questions to ask (first N of the test set). [default: 200]")
@click.option("--num-shots", type=int, help="Few-shot examples in each prompt. [default: 5]")
@click.option("--parallel", type=int, help="Requests in flight. [default: 128]")
@click.option("--max-new-tokens", type=int, help="Generation limit per answer. [default: 512]")
@click.option("--api", type=click.Choice(["generate", "completion", "chat"]), default="generate", show_default=True,
              help="SGLang /generate, /v1/completions or /v1/chat/completions.")
@click.option("--model", help="`model` field for the OpenAI APIs (default: the server's first /v1/models id).")
@click.option("--data-file", type=click.Path(dir_okay=False), help='GSM8K JSONL {"question","answer"} (offline).')
@click.option("--shots-file", type=click.Path(dir_okay=False), help="JSONL to take the few-shot examples from.")
@click.option("--floor", type=FiniteFloatRange(min=0, max=1), help="Exit 1 when accuracy < F. [default: the topology's eval floor]")
@click.option("--max-errors", type=int, default=0, show_default=True,
              help="Failed requests tolerated before the verdict fails (-1 = any number).")
@click.option("--results", type=click.Path(dir_okay=False), callback=writable, help="Per-item JSONL, written as answers arrive.")
@click.option("--resume", is_flag=True, help="Continue from --results, asking only the missing questions.")
@click.option("--timeout", "timeout_s", type=FiniteFloatRange(min=0, min_open=True), default=600.0, show_default=True, help="Seconds per request.")
@click.option("--retries", type=int, default=3, show_default=True, help="Retries on connection errors/5xx.")
@deadline_option("the eval")
@json_option("the verdict")
def gsm8k(json_path: str | None, max_errors: int, **options: Any) -> None:
    """GSM8K accuracy with SGLang's few_shot_gsm8k method (plus lm-eval strict/flexible scores)."""
    from pdctl.evals.registry import EVALS
    from pdctl.evals.session import EvalOptions, execute, prepare

    out = err_console if json_path == "-" else console
    ev = EVALS["gsm8k"]
    prep = prepare(ev, EvalOptions(**options, max_errors=None if max_errors < 0 else max_errors))
    s = prep.settings
    out.print(
        f"{ev.name}: {prep.num_questions} questions, {s['num_shots']} shots, max_new_tokens {s['max_new_tokens']}, "
        f"{s['parallel']} in flight -> {prep.url} ({prep.request.api}); settings: {prep.settings_source}",
        highlight=False,
    )
    if prep.kept:
        out.print(f"resuming {prep.results}: {len(prep.kept)} answered, asking {len(prep.jobs)}", highlight=False)

    summary, outcome, records = _run_with_progress(prep, execute, out)
    _print_summary(ev, summary, out)
    write_json(json_path, summary)
    where = f"`error` in {prep.results}" if prep.results else "--results PATH to keep each answer"
    if summary["errors"]:
        out.print(f"[yellow]{summary['errors']} of {summary['answered']} requests failed[/] (scored as wrong; "
                  f"see {where})", highlight=False)
        for cause, count in _first_causes(records):
            out.print(f"  {count} x first failure: {cause}", highlight=False, markup=False)
    if prep.results:
        out.print(f"results: {prep.results}", highlight=False, soft_wrap=True)
    for note in [*summary.get("notes", []), *summary.get("numerics_notes", [])]:
        out.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    if outcome.dead is not None:  # stopped at the first failures: retrying against a dead worker is pointless
        raise outcome.dead.error(f"eval {ev.name} stopped after {summary['answered']} of {summary['num_questions']} "
                                 "questions")
    if outcome.deadline_passed:
        from pdctl.liveness import deadline_error

        raise deadline_error(f"eval {ev.name}", prep.deadline_s, None,
                             kept=f" after {summary['answered']} of {summary['num_questions']} questions",
                             hint="raise --deadline, lower --num-questions, or `pdctl status --watch`"
                             + (f"; kept in {prep.results}, --resume finishes" if prep.results else ""))
    if outcome.interrupted:
        print_error(f"interrupted: {summary['answered']} of {summary['num_questions']} answered"
                    + (f", kept in {prep.results}; rerun with --resume to finish" if prep.results else ""))
        sys.exit(EXIT_INTERRUPTED)
    if not summary["ok"]:
        raise CheckFailed(f"{ev.name}: " + "; ".join(summary["reasons"]))
    random = " (the serving path: every question answered; accuracy means nothing on random weights)"
    out.print(f"[bold green]{ev.name}: ok[/]" + (random if summary.get("notes") else ""), highlight=False)


def _run_with_progress(prep: Any, execute: Any, out: Any) -> Any:
    """Run the eval under a rich progress bar that shows live accuracy and errors."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    kept = prep.kept
    tally = {"done": len(kept), "correct": sum(1 for r in kept if r.get("correct")),
             "errors": sum(1 for r in kept if r.get("error"))}

    def stats() -> str:
        acc = tally["correct"] / tally["done"] if tally["done"] else 0.0
        return f"acc {acc:.3f}  errors {tally['errors']}"

    progress = Progress(TextColumn(prep.eval.name), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=out, transient=False)
    with progress:
        task = progress.add_task(prep.eval.name, total=prep.num_questions, completed=len(kept), stats=stats())

        def on_record(record: dict) -> None:
            tally["done"] += 1
            tally["correct"] += bool(record.get("correct"))
            tally["errors"] += bool(record.get("error"))
            progress.update(task, advance=1, stats=stats())

        return execute(prep, on_record)


def _first_causes(records: list[dict], top: int = 3) -> list[tuple[str, int]]:
    """The most common first failure of the failed items (later retries may only show a circuit breaker)."""
    from collections import Counter

    causes = Counter(clip((r.get("error_history") or [r["error"]])[0], 300) for r in records if r.get("error"))
    return causes.most_common(top)


def _print_summary(ev: Any, summary: dict, out: Any) -> None:
    """The summary table: accuracy and the eval's own rates (named as EV labels them), then the run's figures."""
    from rich.table import Table

    table = Table(title=ev.name, show_header=True)
    table.add_column("metric")
    table.add_column("value", justify="right")
    n = summary["answered"]
    rows = [
        (ev.labels.get("accuracy", "accuracy"), f"{summary['accuracy']:.3f}  ({summary['correct']}/{n})"),
        *((ev.labels.get(key, key), f"{summary[key]:.3f}") for key in ev.rates),
        ("errors", str(summary["errors"])),
        ("questions", f"{n}/{summary['num_questions']}" + (f" ({summary['resumed']} resumed)" if summary["resumed"]
                                                          else "")),
        ("floor", "none" if summary["floor"] is None else f"{summary['floor']:g}"),
        ("latency_s", f"{summary['latency_s']:.2f}"),
        ("output_throughput", f"{summary['output_throughput']:.1f} tok/s"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    out.print(table)
