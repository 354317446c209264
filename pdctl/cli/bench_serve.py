"""`pdctl bench serve` (and `pdctl bench transfer`, a deprecated alias of `bench-transfer`): options and printing.

The work lives in pdctl.bench.serve (session -> tool -> metrics/compare -> results -> report).
"""

from __future__ import annotations

import math
from typing import Any

import click

from pdctl.cli.bench import bench_transfer
from pdctl.cli.options import FiniteFloatRange, deadline_option, json_option, writable
from pdctl.cli.progress import PhaseProgress, run_live
from pdctl.errors import CheckFailed


@click.group("bench")
def bench_group() -> None:
    """Performance of a deployment: serving sweeps (serve). (`bench transfer`: deprecated, use bench-transfer.)"""


# `pdctl bench-transfer` is the command; `pdctl bench transfer` stays as a deprecated alias of it (the same
# options and code), so that scripts written for either keep working while the docs show one spelling.
bench_group.add_command(click.Command(
    "transfer", params=bench_transfer.params, callback=bench_transfer.callback, help=bench_transfer.help,
    short_help="Alias of `pdctl bench-transfer`.",
    deprecated="use `pdctl bench-transfer` (the same command); `pdctl bench transfer` will be removed"))


def _f(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "-"
    return f"{value:.{digits}g}"


def _write_report(result: Any, path: str) -> Any:
    from pdctl.bench.serve.report import write_report  # matplotlib: only when a report is asked for

    return write_report(result, path)


class LiveProgress(PhaseProgress):
    """A bar per deployment: points done / total, the last point's numbers."""

    def __init__(self, out) -> None:
        super().__init__(out, "bench serve", width=10)

    def __call__(self, update) -> None:
        if update.phase == "setup":
            self.note(update.detail)
            return
        stats, m = update.detail, update.metrics
        if m is not None:
            p = m.point
            stats = (f"c={p.concurrency} isl={p.isl} osl={p.osl}: {_f(m.output_tok_s)} tok/s, TTFT p50 "
                     f"{_f(m.latency.get('ttft_ms', {}).get('p50'))} ms, errors {m.errors}")
        self.show(update.phase, update.done, update.total, stats)


COLUMNS = (("req/s", "request_throughput"), ("out tok/s", "output_tok_s"), ("TTFT p50", "ttft_ms.p50"),
           ("TTFT p90", "ttft_ms.p90"), ("TTFT p99", "ttft_ms.p99"), ("ITL p50", "itl_ms.p50"),
           ("ITL p99", "itl_ms.p99"), ("E2E p50", "e2e_ms.p50"), ("E2E p99", "e2e_ms.p99"))


def print_result(result, out) -> None:
    """The per-point table (candidate, control, ratio rows), problems, gate failures and the verdict."""
    from rich.table import Table

    from pdctl.bench.serve.compare import ratio_of

    ctrl = f"  vs  control {result.control.url} ({result.control.devices()})" if result.control else ""
    out.print(f"candidate {result.candidate.url} ({result.candidate.devices()}){ctrl}", highlight=False)
    out.print(f"tool: {result.tool}; dataset {result.dataset}; API {result.spec.api}; warm-up {result.spec.warmup};"
              f" seed {result.spec.seed}; latencies in ms", highlight=False)
    table = Table(title="ratio = candidate / control" if result.control else None, title_justify="left")
    per_unit = "tok/s/rank" if result.candidate.unit == "CPU rank" else "tok/s/GPU"
    for col in ("c", "isl", "osl", "side", "ok/req", *(name for name, _ in COLUMNS), per_unit):
        table.add_column(col, justify="right")
    controls = result.control_points or [None] * len(result.points)
    for cand, con in zip(result.points, controls):
        p = cand.point
        for side, m in (("candidate", cand), ("control", con)):
            if m is None:
                continue
            style = None if m.ok else "red"
            table.add_row(str(p.concurrency), str(p.isl), str(p.osl), side, f"{m.completed}/{p.requests}",
                          *(_f(m.value(key)) for _, key in COLUMNS), _f(m.output_tok_s_per_gpu), style=style)
        if con is not None:
            table.add_row("", "", "", "[bold]ratio[/]", "", *(_f(ratio_of(key, cand, con), 3) for _, key in COLUMNS),
                          _f(ratio_of("output_tok_s_per_gpu", cand, con), 3))
    if not out.is_terminal:  # a log or a pipe: 15 columns need more than rich's default 80
        out.width = max(out.width, 160)
    out.print(table)
    for side, points in (("candidate", result.points), ("control", result.control_points or [])):
        for m in points:
            v = m.bottleneck or {}
            if v:
                who = f" ({v['role']})" if v.get("role") else ""
                out.print(f"bottleneck {side} c={m.point.concurrency} isl={m.point.isl} osl={m.point.osl}: "
                          f"{v['verdict']}{who} — {'; '.join(v.get('evidence') or [])}", highlight=False)
    for problem in result.problems:
        out.print(f"[red]inconsistent:[/] {problem}", highlight=False)
    for side, points in (("candidate", result.points), ("control", result.control_points or [])):
        for m in points:
            for sample in m.error_samples:
                out.print(f"[red]{side} c={m.point.concurrency} isl={m.point.isl} osl={m.point.osl} error:[/] "
                          f"{sample}", highlight=False)
    for failure in result.gate_failures:
        out.print(f"[red]gate:[/] c={failure.concurrency} isl={failure.isl} osl={failure.osl}: {failure.message}",
                  highlight=False)
    if result.max_regression is not None and not result.gate_failures and result.control_points is not None:
        out.print(f"gate: no regression over {result.max_regression:g}% on {', '.join(result.gate_metrics)}",
                  highlight=False)
    _render_prediction(result.prediction(), out)
    out.print("[bold green]BENCH OK[/]" if result.ok else "[bold red]BENCH FAILED[/]")


def _render_prediction(doc: dict[str, Any] | None, out) -> None:
    """Predicted (the topology's bench.predicted) against measured medians at the predicted point."""
    if doc is None:
        return
    from rich.table import Table

    p = doc["point"]
    if doc["measured"] is None:
        out.print(f"[yellow]prediction:[/] {doc['note']}", highlight=False)
        return
    table = Table(title=f"predicted vs measured (c={p['concurrency']} isl={p['isl']} osl={p['osl']}; "
                  f"{doc['source']})", title_justify="left")
    for col in ("", "TTFT p50 ms", "ITL p50 ms", "out tok/s"):
        table.add_column(col, justify="right")
    keys = ("ttft_ms", "itl_ms", "output_tok_s")
    table.add_row("predicted", *(_f(doc["predicted"][k]) for k in keys))
    table.add_row("measured", *(_f(doc["measured"][k]) for k in keys))
    table.add_row("measured / predicted", *(_f(doc["ratio"][k], 3) for k in keys))
    if doc["targets"]:
        met = doc["targets_met"]
        table.add_row("target", _f(doc["targets"]["ttft_ms"]) + (" met" if met["ttft_ms"] else " MISSED"),
                      _f(doc["targets"]["itl_ms"]) + (" met" if met["itl_ms"] else " MISSED"), "")
    out.print(table)


@bench_group.command("serve")
@click.option("--url", help="The deployment under test (router or server URL).")
@click.option("--run-dir", type=click.Path(file_okay=False),
              help="A `pdctl launch` run: its router (default: the latest run when --url is not given).")
@click.option("--topology", type=click.Path(dir_okay=False),
              help="With --url: take bench.serve defaults and the GPU count from this topology.")
@click.option("--control-url", metavar="URL", help="The control deployment to compare against.")
@click.option("--control-topology", type=click.Path(dir_okay=False),
              help="Launch this topology as the control for the run, tear it down afterwards.")
@click.option("--concurrency", metavar="N,...", help="Concurrency levels. [default: topology bench.serve or 1,8]")
@click.option("--isl", metavar="N,...", help="Input lengths in tokens. [default: 256]")
@click.option("--osl", metavar="N,...", help="Output lengths in tokens (EOS ignored). [default: 64]")
@click.option("--dataset", help="random | gsm8k | a ShareGPT-style JSONL file. [default: random]")
@click.option("--num-prompts", type=int, help="Requests per point. [default: 4 x concurrency, at least 8]")
@click.option("--warmup", type=int, help="Warm-up requests before each point. [default: 2]")
@click.option("--seed", type=int, help="Seed of prompts and request order. [default: 1]")
@click.option("--api", type=click.Choice(["generate", "completions", "chat"]), default="generate",
              show_default=True, help="SGLang /generate (token ids, exact counts) or the OpenAI endpoints.")
@click.option("--request-rate", type=FiniteFloatRange(min=0, min_open=True), help="Poisson arrivals at R requests/s (default: as fast as the "
              "concurrency allows).")
@click.option("--max-regression", metavar="P%", help="Exit 1 when a gated metric is more than P% worse than the "
              "control at any point.")
@click.option("--gate-metrics", metavar="M,...", help="Metrics the gate holds. [default: output_tok_s,"
              "ttft_ms.p50,itl_ms.p50]")
@click.option("--gpus", type=int, help="GPUs of the candidate (per-GPU throughput; default: from its topology "
              "or its servers).")
@click.option("--control-gpus", type=int, help="GPUs of the control (default: as for the candidate).")
@click.option("--tokenizer", help="Tokenizer dir or id the tool counts with (default: what the server reports).")
@click.option("--tool-python", type=click.Path(dir_okay=False),
              help="Interpreter with SGLang installed (default: $PDCTL_SGLANG_PYTHON, ./.venv-sglang, this one).")
@click.option("--work-dir", type=click.Path(file_okay=False),
              help="Keep the tool's plans, outputs and log here (default: a temporary dir, removed).")
@click.option("--launch-timeout", type=FiniteFloatRange(min=1), default=600.0, show_default=True,
              help="--control-topology: seconds to wait for it to become healthy.")
@click.option("--timeout", type=FiniteFloatRange(min=1), default=3600.0, show_default=True,
              help="Seconds one deployment's sweep may take.")
@deadline_option("bench serve")
@json_option("the results")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), callback=writable, help="Write an HTML report here.")
def serve(json_path: str | None, report_path: str | None, concurrency: str | None, isl: str | None,
          osl: str | None, **options: Any) -> None:
    """Serving throughput and latency over a sweep, against a control, with a regression gate.

    Runs SGLang's own serving benchmark at every (concurrency, isl, osl) point against the candidate and, when
    given, the control; reports request and token throughput (also per GPU), TTFT, ITL/TPOT and E2E p50/p90/p99
    and errors per point, and candidate/control ratios. Exit 0 = every request served, every count as sent
    and no gated regression; 1 = failed requests, inconsistent counts or a regression over --max-regression;
    2 = bad input or unreachable URL.
    """
    from pdctl.bench.serve.session import BenchRequest, run_request
    from pdctl.bench.serve.sweep import parse_int_list

    if report_path:  # before the sweep, not after it
        from pdctl.extras import require

        require("matplotlib", what="bench serve --report")
    req = BenchRequest(concurrency=parse_int_list(concurrency, "--concurrency"), isl=parse_int_list(isl, "--isl"),
                       osl=parse_int_list(osl, "--osl"), **options)
    result = run_live(LiveProgress, lambda progress: run_request(req, progress=progress), show=print_result,
                      json_path=json_path, report_path=report_path, write_report=_write_report)
    if not result.ok:
        why = []
        if result.errors:
            why.append(f"{result.errors} request(s) failed")
        if result.problems:
            why.append(f"{len(result.problems)} inconsistent count(s)")
        if result.gate_failures:
            why.append(f"{len(result.gate_failures)} gate failure(s)")
        raise CheckFailed("bench serve failed: " + ", ".join(why))
