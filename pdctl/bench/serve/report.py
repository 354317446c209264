"""`--report PATH`: one self-contained HTML page — verdict, plots and the per-point table with ratios.

Plots (one row per input/output length pair): output tokens/s per GPU against median E2E latency for each
deployment, with its Pareto front (the points no other point beats on both); TTFT p50/p90/p99 against
concurrency; ITL p50/p90/p99 against concurrency. Candidate solid, control dashed. matplotlib is imported
only, lazily (pdctl.htmlreport); the PNG is inlined so the file opens anywhere (as parity's report).
"""

from __future__ import annotations

import html
import math
from pathlib import Path

from pdctl import htmlreport
from pdctl.bench.serve.compare import ratio_of, regression
from pdctl.bench.serve.metrics import PointMetrics
from pdctl.bench.serve.results import BenchResult

PCT_COLORS = {"p50": "tab:blue", "p90": "tab:orange", "p99": "tab:red"}


def pareto(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """The (latency, throughput) points no other point beats on both (lower latency, higher throughput)."""
    finite = sorted(p for p in points if all(math.isfinite(v) for v in p))
    front: list[tuple[float, float]] = []
    for lat, thr in finite:
        if not front or thr > front[-1][1]:
            front.append((lat, thr))
    return front


def _sides(result: BenchResult) -> list[tuple[str, list[PointMetrics], str]]:
    sides = [("candidate", result.points, "-")]
    if result.control_points is not None:
        sides.append(("control", result.control_points, "--"))
    return sides


def plot_png(result: BenchResult) -> str:
    """The plots as a base64 PNG."""
    plt = htmlreport.pyplot()
    shapes = sorted({(m.point.isl, m.point.osl) for m in result.points})
    fig, axes = plt.subplots(len(shapes), 3, figsize=(16, 4.6 * len(shapes)), squeeze=False)
    for row, (isl, osl) in zip(axes, shapes):
        for label, points, style in _sides(result):
            mine = sorted((m for m in points if (m.point.isl, m.point.osl) == (isl, osl) and m.completed),
                          key=lambda m: m.point.concurrency)
            xs = [m.latency["e2e_ms"]["p50"] for m in mine]
            ys = [m.output_tok_s_per_gpu or m.output_tok_s for m in mine]
            color = "tab:green" if label == "candidate" else "tab:gray"
            row[0].plot(xs, ys, style, marker="o", color=color, label=label)
            for m, x, y in zip(mine, xs, ys):
                row[0].annotate(f"c={m.point.concurrency}", (x, y), fontsize=7, xytext=(3, 3),
                                textcoords="offset points")
            front = pareto(list(zip(xs, ys)))
            if front:
                row[0].step([p[0] for p in front], [p[1] for p in front], where="post", color=color, alpha=0.35,
                            linewidth=4, label=f"{label} Pareto front")
            conc = [m.point.concurrency for m in mine]
            for ax, lat in ((row[1], "ttft_ms"), (row[2], "itl_ms")):
                for pct, pcolor in PCT_COLORS.items():
                    ax.plot(conc, [m.latency[lat][pct] for m in mine], style, marker="o", color=pcolor,
                            label=f"{label} {pct}")
        per_gpu = f"per {result.candidate.unit} " if result.candidate.gpus else ""
        row[0].set(title=f"isl {isl} / osl {osl}: throughput vs latency", xlabel="median E2E latency (ms)",
                   ylabel=f"output tokens/s {per_gpu}")
        row[1].set(title="TTFT percentiles", xlabel="concurrency", ylabel="TTFT (ms)")
        row[2].set(title="ITL percentiles", xlabel="concurrency", ylabel="ITL (ms)")
        for ax in row:
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7)
        concurrencies = sorted({m.point.concurrency for m in result.points})
        for ax in row[1:]:
            ax.set_xscale("log", base=2)
            ax.set_xticks(concurrencies, [str(c) for c in concurrencies])
            ax.minorticks_off()
    fig.tight_layout()
    return htmlreport.figure_png_base64(fig)


def _f(value: float | None, digits: int = 4) -> str:
    if value is None or not math.isfinite(value):
        return "—"
    return f"{value:.{digits}g}"


COLUMNS = (("req/s", "request_throughput"), ("out tok/s", "output_tok_s"), ("tok/s/GPU", "output_tok_s_per_gpu"),
           ("TTFT p50", "ttft_ms.p50"),
           ("TTFT p99", "ttft_ms.p99"), ("ITL p50", "itl_ms.p50"), ("ITL p99", "itl_ms.p99"),
           ("E2E p50", "e2e_ms.p50"), ("E2E p99", "e2e_ms.p99"))


def _table(result: BenchResult) -> str:
    unit = "rank" if result.candidate.unit == "CPU rank" else "GPU"
    head = "".join(f"<th>{html.escape(name.replace('/GPU', '/' + unit))}</th>" for name, _ in COLUMNS)
    rows = []
    ctrl = result.control_points or [None] * len(result.points)
    for cand, con in zip(result.points, ctrl):
        p = cand.point
        lead = f"<td rowspan='{3 if con else 1}'>{p.concurrency}</td><td rowspan='{3 if con else 1}'>{p.isl}</td>" \
               f"<td rowspan='{3 if con else 1}'>{p.osl}</td>"
        cells = "".join(f"<td>{_f(cand.value(key))}</td>" for _, key in COLUMNS)
        cls = "bad" if not cand.ok else ""
        rows.append(f"<tr class='{cls}'>{lead}<td>candidate</td><td>{cand.completed}/{p.requests}</td>{cells}"
                    f"{_verdict(cand)}</tr>")
        if con is not None:
            cells = "".join(f"<td>{_f(con.value(key))}</td>" for _, key in COLUMNS)
            rows.append(f"<tr class='{'bad' if not con.ok else ''}'><td>control</td><td>{con.completed}/{p.requests}"
                        f"</td>{cells}{_verdict(con)}</tr>")
            cells = ""
            for _, key in COLUMNS:
                reg = regression(key, cand, con)
                gated = key in result.gate_metrics and result.max_regression is not None
                worse = gated and reg is not None and reg > (result.max_regression or 0)
                cells += f"<td class='{'bad' if worse else 'ratio'}'>{_f(ratio_of(key, cand, con), 3)}</td>"
            rows.append(f"<tr><td>ratio</td><td></td>{cells}<td></td></tr>")
    return ("<table id='points'><tr><th>concurrency</th><th>isl</th><th>osl</th><th>side</th><th>ok/requests</th>"
            f"{head}<th>bottleneck</th></tr>{''.join(rows)}</table>")


def _verdict(m: PointMetrics) -> str:
    """The level's bottleneck cell: the verdict, its evidence as the cell's title."""
    v = m.bottleneck or {}
    if not v:
        return "<td>—</td>"
    who = f" ({v['role']})" if v.get("role") else ""
    title = html.escape("; ".join(v.get("evidence") or []), quote=True)
    return f"<td class='verdict' title='{title}'>{html.escape(v['verdict'] + who)}</td>"


def render_html(result: BenchResult) -> str:
    """The whole report as one HTML string."""
    png = plot_png(result)
    verdict = "PASS" if result.ok else "FAIL"
    control = (f"control: <code>{html.escape(result.control.url)}</code> ({result.control.devices()})"
               if result.control else "no control")
    ratio = "; ratio = candidate / control" if result.control else ""
    gate = "no gate" if result.max_regression is None else (
        f"gate: --max-regression {result.max_regression:g}% on {', '.join(result.gate_metrics)}")
    issues = [f.message for f in result.gate_failures] + result.problems
    if result.errors:
        issues.append(f"{result.errors} request(s) failed")
    items = "".join(f"<li>{html.escape(i)}</li>" for i in issues)
    return f"""<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>pdctl bench serve: {verdict}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; }} table {{ border-collapse: collapse; font-size: 0.85em; }}
td, th {{ border: 1px solid #ccc; padding: 2px 6px; text-align: right; }} img {{ max-width: 100%; }}
tr.bad, td.bad {{ background: #fdd; }} td.ratio {{ color: #235; }}
.verdict {{ font-size: 1.4em; font-weight: bold; color: {'#070' if result.ok else '#b00'}; }}
</style></head><body>
<h1>pdctl bench serve</h1>
<p class="verdict" id="verdict">{verdict}</p>
<ul id="issues">{items}</ul>
<p>candidate: <code>{html.escape(result.candidate.url)}</code> ({result.candidate.devices()}) — {control}<br>
tool: {html.escape(result.tool)}; dataset {html.escape(result.dataset)}; API {result.spec.api};
warm-up {result.spec.warmup}; seed {result.spec.seed}; {html.escape(gate)}<br>
Latencies in ms{ratio}.</p>
<img id="plot" alt="throughput vs latency and TTFT/ITL percentiles vs concurrency" src="data:image/png;base64,{png}">
{_table(result)}
</body></html>
"""


def write_report(result: BenchResult, path: str | Path) -> Path:
    """Write the HTML report to PATH (bad path = exit 2)."""
    return htmlreport.write_report(render_html(result), path)
