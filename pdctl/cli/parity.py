"""`pdctl parity`: logprob parity of a PD deployment against a reference server (options and printing only).

The work lives in pdctl.parity (session -> runner -> compare/results -> report).
"""

from __future__ import annotations

import math

import click

from pdctl.cli.options import FiniteFloatRange, deadline_option, json_option, writable
from pdctl.cli.progress import PhaseProgress, run_live
from pdctl.errors import CheckFailed, NotCalibrated
from pdctl.reference.args import NUMERICS  # argparse + a dataclass: no torch


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
    out.print(f"suite: {len(result.suite)} prompts, {result.max_new_tokens} tokens each; computed from: {result.facts}",
              highlight=False)
    out.print(f"tolerance {result.tolerance:g}, {result.max_new_tokens} tokens: from {result.settings_from}",
              highlight=False)
    _print_tp(result, out)
    for mode in result.modes.values():
        passed = sum(c.passed for c in mode.comparisons)
        numbers = mode.numbers()
        title = f"{mode.name}: {passed}/{len(mode.comparisons)} within the tolerance"
        if mode.floor is not None:
            title += (f"; floor {_fmt(mode.floor.level)} ({', '.join(mode.floor.controls)}), threshold "
                      f"{_fmt(mode.floor.threshold)}, worst {_fmt(numbers['worst'])}, margin {_fmt(numbers['margin'])}")
        table = Table(title=title, title_justify="left")
        for col in ("prompt", "send", "tokens", "first mismatch", "max |Δ|", "score", "flips", "prefill differs",
                    "cached", "status"):
            table.add_column(col)
        shown = [*mode.unexplained, *mode.uncalibrated]  # the explained ones are in --json / --report
        for comp in shown:
            table.add_row(
                f"{comp.prompt} {comp.prompt_name}", comp.label, str(comp.prompt_tokens),
                "-" if comp.first_mismatch is None else str(comp.first_mismatch), _fmt(comp.max_abs_delta),
                _fmt(comp.score), str(comp.flips),
                f"{'yes' if comp.prefill_differs else 'no'} ({_fmt(comp.prefill_max_abs_delta)})",
                str(comp.cached_tokens), "[yellow]NOT CALIBRATED[/]" if comp.uncalibrated else "[red]FAIL[/]",
            )
        rest = [c for c in mode.comparisons if c.passed or c.explained_by]
        explained = sum(1 for c in rest if not c.passed)
        cached = [c.cached_tokens for c in rest]
        status = "[green]pass[/]" + (f" ({explained} explained by the {'floor' if mode.floor else 'prefill'})"
                                     if explained else "")
        table.add_row(f"all others ({len(rest)})" if shown else f"all ({len(rest)})", mode.name, "-", "-",
                      _fmt(max((c.max_abs_delta for c in rest), default=0.0)),
                      _fmt(max((c.score for c in rest), default=0.0)), str(sum(c.flips for c in rest)), "-",
                      f"min {min(cached, default=0)} / max {max(cached, default=0)}", status)
        out.print(table)
        for comp in shown:
            why = f" — unexplained: {comp.unexplained_because}" if comp.unexplained_because else ""
            out.print(f"  {comp.prompt_name} [{comp.label}]: {comp.reason}{why}", highlight=False, markup=False)
    positions = result.positions or {}
    if positions.get("summary"):
        out.print(f"positions: {positions['summary']}", highlight=False, markup=False)
        if positions.get("layer_window"):
            out.print(f"  {positions['layer_window']}", highlight=False, markup=False)
    if result.soak is not None:
        _print_soak(result.soak, out)
    for note in result.numerics_notes:
        out.print(f"[yellow]note:[/] {note}", highlight=False, soft_wrap=True)
    verdict = {"OK": "[bold green]PARITY OK[/]", "FAILED": "[bold red]PARITY FAILED[/]"}.get(
        result.verdict, "[bold yellow]PARITY NOT CALIBRATED[/]")
    calibration = result.calibration
    if result.verdict == "NOT CALIBRATED" and calibration is not None:
        out.print(f"not calibrated: {calibration.why}", highlight=False, markup=False)
        out.print(f"to calibrate: {calibration.calibrate_with}", highlight=False, markup=False)
    notes = [f"margin {_fmt(result.margin)}"] if result.margin is not None else []
    notes += [f"{result.wall_s:.0f} s"] if result.wall_s is not None else []
    out.print(verdict + (f"  ({', '.join(notes)})" if notes else ""))


def _print_tp(result, out) -> None:
    tp = result.tp or {}
    if not tp:
        return
    line = f"attention TP: candidate prefill/decode {tp.get('candidate')}, reference {tp.get('reference')}"
    if tp.get("controls"):
        line += "; TP controls: " + ", ".join(f"tp{c['tp']} ({c['source']}, {c['url']})" for c in tp["controls"])
    out.print(line, highlight=False, markup=False)
    if tp.get("note"):
        out.print(f"[yellow]note:[/] {tp['note']}", highlight=False)


def _print_soak(soak, out) -> None:
    from rich.table import Table

    doc = soak.document()
    table = Table(title=f"soak: {len(doc['rounds'])} rounds, threshold {_fmt(doc['threshold'])}; trend tau "
                        f"{doc['trend']['tau']:.2f} (p {doc['trend']['p']:.2g})", title_justify="left")
    for col in ("round", "served before", "compared", "mean score", "worst", "flips", "unexplained"):
        table.add_column(col)
    for r in doc["rounds"]:
        table.add_row(str(r["round"]), str(r["served_before"]), str(r["compared"]), _fmt(r["mean_score"]),
                      _fmt(r["worst_score"]), str(r["flips"]), str(r["unexplained"]))
    out.print(table)
    if not soak.ok:
        out.print(f"  soak: {soak.reason()}", highlight=False, markup=False)


@click.command("parity")
@click.option("--candidate", "candidate_url", metavar="URL", help="The deployment under test (router or server).")
@click.option("--run-dir", type=click.Path(file_okay=False), help="A `pdctl launch` run: candidate = its router "
              "(default: the latest run when --candidate is not given).")
@click.option("--reference", "reference_url", metavar="URL", help="The reference server, or the router in front of "
              "it (e.g. colocated TP1).")
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
@click.option("--max-new-tokens", type=int,
              help="Tokens generated per prompt (every one scored, teacher-forced on the reference's tokens); "
                   "default: the candidate run's eval.parity, else 32.")
@click.option("--tolerance", type=FiniteFloatRange(min=0),
              help="The kit's check: max |Δ logprob| per token; a comparison within it always passes; "
                   "default: the candidate run's eval.parity, else 0.05.")
@click.option("--control/--no-control", default=True, show_default=True,
              help="Measure the noise floor (controls: the reference itself, TP controls) for every mode.")
@click.option("--floor-factor", "factor", type=FiniteFloatRange(min=1), default=4.0, show_default=True,
              help="A comparison beyond the tolerance fails when its divergence exceeds this x the floor.")
@click.option("--tp-control", "tp_control_urls", multiple=True, metavar="URL",
              help="A correct server (or a router in front of one) at the candidate's attention TP (else parity "
                   "starts one for the reference engine when the TP splits differ; without one the run is not "
                   "calibrated, exit 3). Repeatable.")
@click.option("--no-tp-control", is_flag=True, help="Never use or start a TP control.")
@click.option("--numerics", type=click.Choice(list(NUMERICS)),
              help="Numerics of the reference-engine servers parity starts (--reference-topology, TP controls); "
                   "default: the topology's, and the candidate's for TP controls.")
@click.option("--soak", metavar="N", help="Then send the suite N rounds (or for a duration: 90s, 10m) under "
              "concurrency; fail on a round beyond the floor or a divergence that grows with served requests.")
@click.option("--copies", type=int, default=3, show_default=True, help="Concurrent and soak: copies of the suite.")
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
@deadline_option("parity")
@json_option("the verdict")
@click.option("--report", "report_path", type=click.Path(dir_okay=False), callback=writable, help="Write an HTML report here.")
def parity(candidate_url, run_dir, reference_url, reference_topology, decode_url, prefill_url, cold, warm,
           concurrent, prompts_file, max_new_tokens, tolerance, control, factor, tp_control_urls, no_tp_control,
           numerics, soak, copies, max_prompt_tokens, model, page_size, vocab_size, sliding_window,
           chunked_prefill_size, context_length, seed, launch_timeout, deadline_s, json_path, report_path) -> None:
    """Prove a PD deployment computes what a reference server computes, against a measured noise floor.

    Exit 0 = parity; 1 = a comparison beyond the tolerance whose divergence exceeds --floor-factor x the floor
    (what correct servers show under the same conditions), an error or missing prefix reuse, or a soak that
    drifts; 2 = bad input or unreachable URL; 3 = not calibrated: the floor lacks a TP control the comparison
    needs (TP splits unknown, or no control at the candidate's TP) and nothing beyond it is gross.
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
        seed=seed, launch_timeout=launch_timeout, deadline_s=deadline_s, factor=factor,
        tp_control_urls=tuple(tp_control_urls), tp_control=not no_tp_control, numerics=numerics, soak=soak,
    )
    result = run_live(LiveProgress, lambda progress: run_request(req, progress=progress), show=_print_result,
                      json_path=json_path, report_path=report_path, write_report=_write_report)
    if result.verdict == "FAILED":
        bad = [f"{len(mode.unexplained)} unexplained failure(s) in {name}" for name, mode in result.modes.items()
               if mode.unexplained]
        if result.soak is not None and result.soak.verdict == "FAILED":
            bad.append(f"soak: {result.soak.reason()}")
        raise CheckFailed("parity failed: " + ", ".join(bad))
    if result.verdict == "NOT CALIBRATED":
        beyond = sum(len(mode.uncalibrated) for mode in result.modes.values())
        beyond += sum(r.uncalibrated for r in result.soak.rounds) if result.soak is not None else 0
        raise NotCalibrated(f"parity not calibrated: {beyond} comparison(s) beyond a floor that lacks a TP control "
                            f"({result.calibration.why if result.calibration else 'unknown'})",
                            detail=f"to calibrate: {result.calibration.calibrate_with}" if result.calibration else None)
