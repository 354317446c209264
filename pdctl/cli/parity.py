"""`pdctl parity`: logprob parity of a PD deployment against a reference server (options and printing only).

The work lives in pdctl.parity (session -> runner -> compare/results -> report).
"""

from __future__ import annotations

import math

import click

from pdctl.cli.options import FiniteFloatRange, json_option, writable
from pdctl.cli.progress import PhaseProgress, run_live
from pdctl.errors import CheckFailed


def _fmt(value: float | None) -> str:
    if value is None:
        return "-"
    return "inf" if not math.isfinite(value) else f"{value:.4g}"


def _write_report(result, path: str):
    from pdctl.parity.report import write_report  # matplotlib: only when a report is asked for

    return write_report(result, path)


class LiveProgress(PhaseProgress):
    """Parity's live progress (as `eval gsm8k` shows its own): one bar per phase — cold, warm, control warm,
    concurrent, ... — with prompts done/total and the passes and failures so far."""

    def __init__(self, out) -> None:
        super().__init__(out, "parity")

    def __call__(self, update) -> None:
        if update.phase == "setup":  # before any prompt is sent: say what is happening
            self.note(update.detail)
        elif not update.compares:  # collecting answers: nothing has passed or failed yet
            self.show(update.phase, update.done, update.total, update.detail)
        else:
            self.show(update.phase, update.done, update.total,
                      f"pass {update.passed} fail {update.failed}  {update.detail}")


def _print_result(result, out) -> None:
    from rich.table import Table

    out.print(f"candidate {result.candidate}  vs  reference {result.reference}", highlight=False)
    workers = result.candidate_workers
    if workers.get("decode"):
        out.print(f"candidate prefill {', '.join(workers.get('prefill') or ['?'])}; decode {', '.join(workers['decode'])}",
                  highlight=False)
    else:
        out.print("candidate decode servers unknown: warm flushes nothing between its two sends", highlight=False)
    out.print(f"suite: {len(result.suite)} prompts; computed from: {result.facts}", highlight=False)
    for mode in result.modes.values():
        passed = sum(c.passed for c in mode.comparisons)
        title = f"{mode.name}: {passed}/{len(mode.comparisons)} passed"
        if mode.control is not None:
            cpass = sum(c.passed for c in mode.control)
            title += f"  (control: {cpass}/{len(mode.control)} passed, floor |Δ| {_fmt(mode.control_floor)})"
        table = Table(title=title, title_justify="left")
        for col in ("prompt", "send", "tokens", "first mismatch", "max |Δ|", "prefill differs", "cached", "status"):
            table.add_column(col)
        shown = mode.failures
        for comp in shown:
            status = f"explained: {comp.explained_by}" if comp.explained_by else "[red]FAIL[/]"
            table.add_row(
                f"{comp.prompt} {comp.prompt_name}", comp.label, str(comp.prompt_tokens),
                "-" if comp.first_mismatch is None else str(comp.first_mismatch), _fmt(comp.max_abs_delta),
                f"{'yes' if comp.prefill_differs else 'no'} ({_fmt(comp.prefill_max_abs_delta)})",
                str(comp.cached_tokens), status,
            )
        if not shown:
            worst = max((c.max_abs_delta for c in mode.comparisons), default=0.0)
            cached = [c.cached_tokens for c in mode.comparisons]
            table.add_row("all", mode.name, "-", "-", _fmt(worst), "-",
                          f"min {min(cached, default=0)} / max {max(cached, default=0)}", "[green]pass[/]")
        out.print(table)
        for comp in shown:
            why = f" — unexplained: {comp.unexplained_because}" if comp.unexplained_because else ""
            out.print(f"  {comp.prompt_name} [{comp.label}]: {comp.reason}{why}", highlight=False, markup=False)
    verdict = "[bold green]PARITY OK[/]" if result.ok else "[bold red]PARITY FAILED[/]"
    out.print(verdict)


@click.command("parity")
@click.option("--candidate", "candidate_url", metavar="URL", help="The deployment under test (router or server).")
@click.option("--run-dir", type=click.Path(file_okay=False), help="A `pdctl launch` run: candidate = its router "
              "(default: the latest run when --candidate is not given).")
@click.option("--reference", "reference_url", metavar="URL", help="The reference server (e.g. colocated TP1).")
@click.option("--reference-topology", type=click.Path(dir_okay=False),
              help="Launch this topology as the reference for the run, tear it down afterwards.")
@click.option("--decode-url", multiple=True, metavar="URL", help="With --candidate: decode server(s) to flush for "
              "--warm (default: discovered from a PD router's /workers; if none, warm flushes nothing between "
              "its two sends). Repeatable.")
@click.option("--prefill-url", multiple=True, metavar="URL", help="With --candidate: prefill server(s) "
              "(server info and cold flushes go to them directly). Repeatable.")
@click.option("--cold", is_flag=True, help="Flush both caches before each prompt; compare.")
@click.option("--warm", is_flag=True, help="Resend after flushing only decode, plus shared-prefix variants.")
@click.option("--concurrent", is_flag=True, help="Send the suite (several copies) all at once; compare.")
@click.option("--prompts", "prompts_file", type=click.Path(dir_okay=False),
              help='JSONL of {"text": ...} or {"input_ids": [...]} (default: the edge-length suite).')
@click.option("--max-new-tokens", type=int, default=4, show_default=True)
@click.option("--tolerance", type=FiniteFloatRange(min=0), default=0.05, show_default=True, help="Max |Δ logprob| per token.")
@click.option("--control/--no-control", default=True, show_default=True,
              help="Reference-vs-itself noise floor for warm/concurrent.")
@click.option("--copies", type=int, default=3, show_default=True, help="Concurrent: copies of the suite.")
@click.option("--max-prompt-tokens", type=int, help="Cap the default suite's longest prompt.")
@click.option("--model", help="Model dir / config.json / preset for vocabulary and sliding window.")
@click.option("--page-size", type=int, help="Override the page size the suite is built around.")
@click.option("--vocab-size", type=int, help="Override the vocabulary size token ids are drawn from.")
@click.option("--sliding-window", type=int, help="Override the sliding window.")
@click.option("--chunked-prefill-size", type=int, help="Override the chunked-prefill size.")
@click.option("--context-length", type=int, help="Override the context length.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the suite's token ids.")
@click.option("--launch-timeout", type=FiniteFloatRange(min=1), default=600.0, show_default=True,
              help="--reference-topology: seconds to wait for it to become healthy.")
@json_option("the verdict")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), callback=writable, help="Write an HTML report here.")
def parity(candidate_url, run_dir, reference_url, reference_topology, decode_url, prefill_url, cold, warm,
           concurrent, prompts_file, max_new_tokens, tolerance, control, copies, max_prompt_tokens, model,
           page_size, vocab_size, sliding_window, chunked_prefill_size, context_length, seed, launch_timeout,
           json_path, report_path) -> None:
    """Prove a PD deployment computes what a reference server computes; say where a difference comes from.

    Exit 0 = parity; 1 = a cold comparison failed, or a warm/concurrent failure is explained neither by
    different prefill logits nor by the reference's own noise floor; 2 = bad input or unreachable URL.
    """
    from pdctl.parity.session import ParityRequest, run_request

    if report_path:  # before the comparisons, not after them
        from pdctl.extras import require

        require("matplotlib", what="parity --report")
    modes = tuple(m for m, on in (("cold", cold), ("warm", warm), ("concurrent", concurrent)) if on)
    req = ParityRequest(
        candidate_url=candidate_url, run_dir=run_dir, reference_url=reference_url,
        reference_topology=reference_topology, decode_urls=tuple(decode_url), prefill_urls=tuple(prefill_url),
        modes=modes or ("cold", "warm", "concurrent"), prompts_file=prompts_file, max_new_tokens=max_new_tokens,
        tolerance=tolerance, control=control, copies=copies, max_prompt_tokens=max_prompt_tokens, model=model,
        overrides={"page_size": page_size, "vocab_size": vocab_size, "sliding_window": sliding_window,
                   "chunked_prefill_size": chunked_prefill_size, "context_length": context_length},
        seed=seed, launch_timeout=launch_timeout,
    )
    result = run_live(LiveProgress, lambda progress: run_request(req, progress=progress), show=_print_result,
                      json_path=json_path, report_path=report_path, write_report=_write_report)
    if not result.ok:
        bad = {name: len(mode.unexplained) for name, mode in result.modes.items() if not mode.ok}
        raise CheckFailed("parity failed: " + ", ".join(f"{n} unexplained failure(s) in {m}" for m, n in bad.items()))
