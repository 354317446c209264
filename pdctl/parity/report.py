"""`--report PATH`: a self-contained HTML page with a plot of |Δ logprob| per generated position per mode.

Why HTML with an embedded PNG: the report is something a user attaches to an issue or a PR (as SGLang
PR #40909's validation did with its numbers); one file with no external assets opens anywhere. matplotlib
is imported lazily through pdctl.htmlreport (Agg backend, no display on servers).
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from pdctl import htmlreport
from pdctl.htmlreport import figure_png_base64, pyplot
from pdctl.parity.compare import Comparison
from pdctl.parity.results import ModeResult, ParityResult


def _finite(values: list[float], zero: float) -> list[float]:
    """VALUES for a log axis: non-finite ones left out (NaN), exact zeros drawn at ZERO (the axis' bottom)."""
    return [math.nan if not math.isfinite(v) else max(v, zero) for v in values]


def _log_bottom(values: list[float], tolerance: float) -> float:
    """The bottom of the log |Δ| axis: a decade under the smallest positive value (a pass is typically
    1e-17, float rounding), never above a decade under the tolerance."""
    positive = [v for v in values if v > 0]
    return max(1e-20, min([*positive, tolerance]) / 10)


def plot_figure(result: ParityResult):
    """One panel per mode: |Δ logprob| of every comparison at each position, control in grey."""
    plt = pyplot()
    modes = list(result.modes.values())
    fig, axes = plt.subplots(1, max(1, len(modes)), figsize=(5.2 * max(1, len(modes)), 4.0), squeeze=False)
    for ax, mode in zip(axes[0], modes):
        _plot_mode(ax, mode, result)
    fig.tight_layout()
    return fig


def _plot_mode(ax, mode: ModeResult, result: ParityResult) -> None:
    """|Δ| on a log axis: a pass (deltas of 1e-17 under a tolerance of 0.05) shows how far under the tolerance
    each position is, instead of a flat line at 0 (a linear axis from 0 to the tolerance). Exact zeros sit on
    the bottom of the axis."""
    values = [d for c in [*mode.comparisons, *(mode.control or [])] for d in c.deltas if math.isfinite(d)]
    bottom = _log_bottom(values, result.tolerance)
    for comp in mode.control or []:
        xs = list(range(len(comp.deltas)))
        ax.plot(xs, _finite(comp.deltas, bottom), color="0.6", marker="x", linewidth=0.6, alpha=0.7)
    for comp in mode.comparisons:
        xs = list(range(len(comp.deltas)))
        color = "tab:blue" if comp.passed else ("tab:orange" if comp.explained_by else "tab:red")
        ax.plot(xs, _finite(comp.deltas, bottom), color=color, marker="o", markersize=3, linewidth=0.8, alpha=0.8)
    ax.axhline(result.tolerance, color="tab:red", linestyle="--", linewidth=1, label=f"tolerance {result.tolerance:g}")
    floor = mode.control_floor
    if floor is not None and math.isfinite(floor):
        ax.axhline(floor, color="0.4", linestyle=":", linewidth=1, label=f"control floor {floor:.3g}")
    ax.plot([], [], color="tab:blue", marker="o", label="candidate vs reference")
    if mode.control:
        ax.plot([], [], color="0.6", marker="x", label="reference vs itself")
    ax.set_title(f"{mode.name}: {sum(c.passed for c in mode.comparisons)}/{len(mode.comparisons)} passed")
    ax.set_xlabel("generated token position")
    ax.set_ylabel("|Δ logprob| (log; exact 0 at the bottom)")
    ax.set_xlim(-0.5, max(result.max_new_tokens - 0.5, 0.5))
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_yscale("log")
    ax.set_ylim(bottom, 3 * max([result.tolerance, floor or 0.0, *values]))
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


def _mode_table(mode: ModeResult) -> str:
    rows = []
    for comp in mode.comparisons:
        status = "pass" if comp.passed else (f"explained ({comp.explained_by})" if comp.explained_by else "FAIL")
        rows.append(
            "<tr class='{cls}'><td>{p}</td><td>{name}</td><td>{label}</td><td>{tok}</td><td>{fm}</td><td>{d}</td>"
            "<td>{pd}</td><td>{ct}</td><td>{st}</td><td>{why}</td></tr>".format(
                cls="ok" if comp.passed else ("expl" if comp.explained_by else "bad"),
                p=comp.prompt, name=html.escape(comp.prompt_name), label=html.escape(comp.label),
                tok=comp.prompt_tokens, fm="—" if comp.first_mismatch is None else comp.first_mismatch,
                d=_fmt(comp.max_abs_delta),
                pd=html.escape(f"{yes_no(comp.prefill_differs)} ({_fmt(comp.prefill_max_abs_delta)})"),
                ct=comp.cached_tokens, st=status, why=html.escape(_why(comp)),
            )
        )
    control = ""
    if mode.control is not None:
        control = (f"<p>Control (reference vs itself): {sum(c.passed for c in mode.control)}/{len(mode.control)} "
                   f"passed, noise floor |Δ| = {_fmt(mode.control_floor)}</p>")
    return (
        f"<h2>{html.escape(mode.name)} — {'OK' if mode.ok else 'FAILED'}</h2>{control}"
        "<table><tr><th>prompt</th><th>name</th><th>send</th><th>tokens</th><th>first mismatch</th>"
        "<th>max |Δ|</th><th>prefill differs (|Δ|)</th><th>cached</th><th>status</th><th>why</th></tr>"
        + "".join(rows) + "</table>"
    )


def render_html(result: ParityResult) -> str:
    """The whole report as one HTML string (the plot inlined as a base64 PNG)."""
    png = figure_png_base64(plot_figure(result), dpi=100)
    verdict = "PASS" if result.ok else "FAIL"
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>pdctl parity: {verdict}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }} table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; }} img {{ max-width: 100%; }} tr.bad {{ background: #fdd; }} tr.expl {{ background: #ffe9c7; }}
.verdict {{ font-size: 1.4em; font-weight: bold; color: {'#070' if result.ok else '#b00'}; }}
</style></head><body>
<h1>pdctl parity</h1>
<p class="verdict" id="verdict">{verdict}</p>
<p>candidate: <code>{html.escape(result.candidate)}</code> — reference: <code>{html.escape(result.reference)}</code><br>
tolerance {result.tolerance:g}, max_new_tokens {result.max_new_tokens}, {len(result.suite)} prompts<br>
suite computed from: {html.escape(result.facts or 'prompts file')}</p>
<img id="plot" alt="|Δ logprob| per generated position per mode" src="data:image/png;base64,{png}">
{''.join(_mode_table(m) for m in result.modes.values())}
</body></html>
"""


def write_report(result: ParityResult, path: str | Path) -> Path:
    """Write the HTML report to PATH (bad path = exit 2)."""
    return htmlreport.write_report(render_html(result), path)
