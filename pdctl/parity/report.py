"""`--report PATH`: a self-contained HTML page — the verdict against the floor, plots and every comparison.

Why HTML with an embedded PNG: the report is something a user attaches to an issue or a PR (as SGLang
PR #40909's validation did with its numbers); one file with no external assets opens anywhere. matplotlib
is imported lazily through pdctl.htmlreport (Agg backend, no display on servers).

Plots (log scale from a decade under the smallest value drawn, so that a pass is never a flat line at zero): per mode, every comparison's score by
prompt length with the controls' scores and the threshold; the divergence at every scored position by
sequence position (the position-resolved view); and, with --soak, each round's scores by served requests.
"""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

from pdctl import htmlreport
from pdctl.htmlreport import figure_png_base64, pyplot
from pdctl.parity.compare import KL_CAP, Comparison
from pdctl.parity.floor import STATISTIC
from pdctl.parity.results import ModeResult, ParityResult

_EPS = 1e-7  # log-scale plots: the axis' bottom is at most a decade under this
_LOWEST = 1e-20


def _bottom(values: list[float]) -> float:
    """The bottom of a log axis: a decade under the smallest positive value plotted (a pass is typically 1e-17,
    float rounding: issue 20), at most a decade under _EPS; exact zeros are drawn there."""
    positive = [v for v in values if math.isfinite(v) and v > 0]
    return max(_LOWEST, min([*positive, _EPS]) / 10)


def _y(value: float, bottom: float) -> float:
    return max(bottom, min(value, KL_CAP)) if math.isfinite(value) else KL_CAP


def _plotted(result: ParityResult) -> list[float]:
    """Every value the plots draw: scores, per-position KLs, floors, soak rounds."""
    values: list[float] = []
    for mode in result.modes.values():
        for comp in [*mode.comparisons, *(mode.control or [])]:
            values += [comp.score, *(p.kl for p in comp.positions)]
        if mode.floor is not None:
            values += [mode.floor.level, mode.floor.threshold]
    if result.soak is not None:
        values += [v for r in result.soak.rounds for v in (r.mean, r.worst)]
    return values


def plot_figure(result: ParityResult):
    """Scores per mode, divergence by sequence position, and the soak rounds (when there are any)."""
    plt = pyplot()
    modes = list(result.modes.values())
    panels = len(modes) + 1 + (1 if result.soak is not None else 0)
    fig, axes = plt.subplots(1, panels, figsize=(5.0 * panels, 4.0), squeeze=False)
    bottom = _bottom(_plotted(result))
    for ax, mode in zip(axes[0], modes):
        _plot_mode(ax, mode, bottom)
    _plot_positions(axes[0][len(modes)], result, bottom)
    if result.soak is not None:
        _plot_soak(axes[0][-1], result.soak, bottom)
    fig.tight_layout()
    return fig


def _log_x(ax) -> None:
    """A log x axis labelled at its decades only (minor labels overlap)."""
    from matplotlib.ticker import NullFormatter

    ax.set_xscale("log")
    ax.xaxis.set_minor_formatter(NullFormatter())


def _plot_mode(ax, mode: ModeResult, bottom: float) -> None:
    for comps, color, marker, label in (
        (mode.control or [], "0.55", "x", "controls (correct servers)"),
        ([c for c in mode.comparisons if c.passed or c.explained_by], "tab:blue", "o", "candidate"),
        (mode.unexplained, "tab:red", "o", "candidate, beyond the floor"),
    ):
        if comps:
            ax.scatter([c.prompt_tokens for c in comps], [_y(c.score, bottom) for c in comps], c=color,
                       marker=marker, s=18, alpha=0.8, label=label)
    if mode.floor is not None:
        ax.axhline(_y(mode.floor.level, bottom), color="0.4", linestyle=":", linewidth=1,
                   label=f"floor {mode.floor.level:.3g}")
        ax.axhline(_y(mode.floor.threshold, bottom), color="tab:red", linestyle="--", linewidth=1,
                   label=f"threshold {mode.floor.threshold:.3g}")
    ax.set_ylim(bottom, KL_CAP * 2)
    ax.set_yscale("log")
    _log_x(ax)
    ax.set_title(f"{mode.name}: {mode.verdict} ({len(mode.unexplained) + len(mode.uncalibrated)} beyond the floor)")
    ax.set_xlabel("prompt tokens")
    ax.set_ylabel("score (mean capped top-k KL, nats; log, 0 at the bottom)")
    ax.legend(fontsize=7, loc="upper left")


def _plot_positions(ax, result: ParityResult, bottom: float) -> None:
    def points(pick) -> list[tuple[int, float]]:
        return [(p.sequence_position, _y(p.kl, bottom)) for m in result.modes.values() for c in pick(m)
                for p in c.positions]

    cand = points(lambda m: m.comparisons)
    floor = points(lambda m: m.control or [])
    bad = points(lambda m: m.unexplained)
    for points, color, label in ((floor, "0.6", "controls"), (cand, "tab:blue", "candidate"),
                                 (bad, "tab:red", "failed comparisons")):
        if points:
            ax.scatter([x for x, _ in points], [y for _, y in points], c=color, s=4, alpha=0.5, label=label)
    first = (result.positions or {}).get("first_divergent_position")
    if first is not None:
        ax.axvline(first, color="tab:red", linestyle="--", linewidth=1, label=f"onset {first}")
    window = (result.positions or {}).get("window")
    if window:
        ax.axvline(window, color="tab:green", linestyle=":", linewidth=1, label=f"window {window}")
    ax.set_ylim(bottom, KL_CAP * 2)
    ax.set_yscale("log")
    if cand or floor:
        _log_x(ax)
    ax.set_xlabel("sequence position (prompt + output index)")
    ax.set_ylabel("top-k KL per position (nats)")
    ax.set_title("divergence by position")
    ax.legend(fontsize=7, loc="upper left")


def _plot_soak(ax, soak: Any, bottom: float) -> None:
    rounds = soak.rounds
    xs = [r.served_before for r in rounds]
    ax.plot(xs, [_y(r.mean, bottom) for r in rounds], color="tab:blue", marker="o", label="mean score")
    ax.plot(xs, [_y(r.worst, bottom) for r in rounds], color="tab:purple", marker="^", label="worst score")
    if soak.floor is not None:
        ax.axhline(_y(soak.floor.threshold, bottom), color="tab:red", linestyle="--", linewidth=1, label="threshold")
    ax.set_ylim(bottom, KL_CAP * 2)
    ax.set_yscale("log")
    ax.set_xlabel("requests served before the round")
    ax.set_title(f"soak: {soak.verdict}")
    ax.legend(fontsize=7, loc="upper left")


def yes_no(value: bool | None) -> str:
    """A flag as a reader says it (reports never print Python's True/False)."""
    return "—" if value is None else ("yes" if value else "no")


def _why(comp: Comparison) -> str:
    """The failure's reason, and why nothing explains it (when that is known)."""
    return comp.reason + (f" (unexplained: {comp.unexplained_because})" if comp.unexplained_because else "")


def _fmt(value: float | None) -> str:
    if value is None:
        return "—"
    return "inf" if not math.isfinite(value) else f"{value:.4g}"


def _floor_line(mode: ModeResult) -> str:
    if mode.floor is None:
        return "<p>No floor measured (--no-control).</p>"
    f = mode.floor
    numbers = mode.numbers()
    return (f"<p>Floor ({html.escape(', '.join(f.controls))}): {len(f.comparisons)} control comparisons, level "
            f"<b>{_fmt(f.level)}</b>, threshold {_fmt(f.threshold)} ({f.factor:g} x); candidate worst score "
            f"{_fmt(numbers['worst'])}, ratio to the floor {_fmt(numbers['ratio'])}, margin "
            f"<b>{_fmt(numbers['margin'])}</b>.</p>")


def _mode_table(mode: ModeResult) -> str:
    rows = []
    for comp in mode.comparisons:
        status = "pass" if comp.passed else (f"explained ({comp.explained_by})" if comp.explained_by else "FAIL")
        rows.append(
            "<tr class='{cls}'><td>{p}</td><td>{name}</td><td>{label}</td><td>{tok}</td><td>{fm}</td><td>{d}</td>"
            "<td>{sc}</td><td>{fl}</td><td>{pd}</td><td>{ct}</td><td>{st}</td><td>{why}</td></tr>".format(
                cls="ok" if comp.passed else ("expl" if comp.explained_by else "bad"),
                p=comp.prompt, name=html.escape(comp.prompt_name), label=html.escape(comp.label),
                tok=comp.prompt_tokens, fm="—" if comp.first_mismatch is None else comp.first_mismatch,
                d=_fmt(comp.max_abs_delta), sc=_fmt(comp.score), fl=f"{comp.flips} ({comp.resyncs} resends)",
                pd=html.escape(f"{yes_no(comp.prefill_differs)} ({_fmt(comp.prefill_max_abs_delta)})"),
                ct=comp.cached_tokens, st=status, why=html.escape(_why(comp)),
            )
        )
    return (
        f"<h2>{html.escape(mode.name)} — {mode.verdict}</h2>{_floor_line(mode)}"
        "<table><tr><th>prompt</th><th>name</th><th>send</th><th>tokens</th><th>first mismatch</th>"
        "<th>max |Δ|</th><th>score</th><th>flips</th><th>prefill differs (|Δ|)</th><th>cached</th><th>status</th>"
        "<th>why</th></tr>" + "".join(rows) + "</table>"
    )


def _positions_html(positions: dict[str, Any]) -> str:
    if not positions:
        return ""
    summary = html.escape(str(positions.get("summary", "")))
    covered = positions.get("covered_up_to")
    parts = [f"<h2>Positions</h2><p id='positions'>{summary} (the suite reached sequence position {covered}).</p>"]
    if positions.get("layer_window"):
        parts.append(f"<p>{html.escape(positions['layer_window'])}</p>")
    rows = []
    for mode, bands in (positions.get("bands") or {}).items():
        for b in bands:
            rows.append(f"<tr class='{'bad' if b['beyond_floor'] else 'ok'}'><td>{html.escape(mode)}</td>"
                        f"<td>[{b['from']}, {b['to']})</td><td>{b['positions']}</td><td>{_fmt(b['mean_kl'])}</td>"
                        f"<td>{b['flips']}</td><td>{_fmt(b['floor_mean_kl'])}</td></tr>")
    if rows:
        parts.append("<table><tr><th>mode</th><th>sequence positions</th><th>scored</th><th>mean KL</th>"
                     "<th>flips</th><th>floor mean KL</th></tr>" + "".join(rows) + "</table>")
    return "".join(parts)


def _soak_html(soak: Any) -> str:
    if soak is None:
        return ""
    doc = soak.document()
    rows = "".join(f"<tr class='{'bad' if r['unexplained'] else 'ok'}'><td>{r['round']}</td><td>{r['served_before']}"
                   f"</td><td>{r['compared']}</td><td>{_fmt(r['mean_score'])}</td><td>{_fmt(r['worst_score'])}</td>"
                   f"<td>{r['flips']}</td><td>{r['unexplained']}</td></tr>" for r in doc["rounds"])
    reason = doc["reason"] or "no round beyond the floor, no growing divergence"
    return (f"<h2 id='soak'>Soak — {soak.verdict}</h2><p>{html.escape(reason)}; trend tau "
            f"{doc['trend']['tau']:.2f}, p {doc['trend']['p']:.2g}.</p><table><tr><th>round</th><th>served before</th>"
            f"<th>compared</th><th>mean score</th><th>worst</th><th>flips</th><th>beyond the floor</th></tr>{rows}"
            "</table>")


def render_html(result: ParityResult) -> str:
    """The whole report as one HTML string (the plot inlined as a base64 PNG)."""
    png = figure_png_base64(plot_figure(result), dpi=100)
    verdict = {"OK": "PASS", "FAILED": "FAIL"}.get(result.verdict, result.verdict)
    tp = result.tp or {}
    tp_line = (f"attention TP: candidate {tp.get('candidate')}, reference {tp.get('reference')}; TP controls: "
               + (", ".join(f"tp{c['tp']} ({c['source']})" for c in tp.get("controls") or []) or "none")
               + (f" — {tp['note']}" if tp.get("note") else "")) if tp else ""
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>pdctl parity: {verdict}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }} table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; }} img {{ max-width: 100%; }} tr.bad {{ background: #fdd; }} tr.expl {{ background: #ffe9c7; }}
.verdict {{ font-size: 1.4em; font-weight: bold; color: {'#070' if result.ok else '#b00' if result.verdict == 'FAILED' else '#a60'}; }}
</style></head><body>
<h1>pdctl parity</h1>
<p class="verdict" id="verdict">{verdict}</p>
<p id="margin">margin {_fmt(result.margin)} (threshold / worst score beyond the tolerance; &gt; 1 passes)</p>
<p>candidate: <code>{html.escape(result.candidate)}</code> — reference: <code>{html.escape(result.reference)}</code><br>
tolerance {result.tolerance:g}, max_new_tokens {result.max_new_tokens}, {len(result.suite)} prompts, floor factor {result.factor:g}<br>
statistic: {html.escape(STATISTIC)}<br>
{html.escape(tp_line)}<br>
numerics: {html.escape(str(result.numerics or {}))}<br>
suite computed from: {html.escape(result.facts or 'prompts file')}</p>
<img id="plot" alt="scores per mode, divergence by position" src="data:image/png;base64,{png}">
{''.join(_mode_table(m) for m in result.modes.values())}
{_positions_html(result.positions)}
{_soak_html(result.soak)}
</body></html>
"""


def write_report(result: ParityResult, path: str | Path) -> Path:
    """Write the HTML report to PATH (bad path = exit 2)."""
    return htmlreport.write_report(render_html(result), path)
