"""`pdctl suggest`: options and rendering only; the work lives in pdctl.suggest (AIConfigurator imported there).

Exit codes: 0 a candidate meets the targets (and `--out` was written); 1 none does (the nearest misses and what
blocked them are printed and in the JSON); 2 bad input (unknown model / system / version, impossible targets,
too few GPUs, the `suggest` extra not installed).
"""

from __future__ import annotations

from typing import Any

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import FiniteFloatRange, json_option, writable
from pdctl.errors import CheckFailed
from pdctl.transfer.registry import NAMES


def _cell(problems: list[dict[str, str]]) -> str:
    return "; ".join(f"{p['rule']}: {p['message']}" for p in problems)


def render(result: Any, out: Any, top: int) -> None:
    """The ranked table (top K candidates, the rejected nearest misses when nothing is feasible)."""
    from rich.table import Table
    from rich.text import Text

    doc = result.document()
    i, link, meta = doc["inputs"], doc["link"], doc["aiconfigurator"]
    out.print(f"[bold]{i['model']}[/] on {i['gpus']} x {i['system']}, ISL {i['isl']} / OSL {i['osl']}, targets "
              f"TTFT {i['ttft_ms']:g} ms, ITL {i['itl_ms']:g} ms; SGLang {i['sglang']}, {i['backend']}", highlight=False)
    gbps = "unlimited" if link["gbps"] is None else f"{link['gbps']:g} GB/s"
    out.print(f"KV link: {gbps}, {link['us_per_descriptor']:g} µs/descriptor ({link['source']})", highlight=False)
    if link.get("note"):
        out.print(f"  [yellow]note:[/] {link['note']}", highlight=False)
    cached = "cached" if meta.get("cached") else f"{meta.get('cpu_s', 0):g} CPU s"
    out.print(f"AIConfigurator {meta.get('aiconfigurator')} (SGLang perf data {meta.get('database')}), same-TP gate "
              f"{meta['same_tp_gate']}: {meta['rows']} rows ({cached}) -> {len(result.candidates)} deployments",
              highlight=False)
    shown = [c for c in result.candidates if c.ok][:top] or result.nearest_misses(top)
    title = "candidates" if result.ok else "no candidate meets the targets: nearest misses"
    table = Table(title=title, title_justify="left")
    for col in ("#", "prefill", "decode", "GPUs", "AIC TTFT", "KV ms", "TTFT", "ITL", "tok/s/GPU", "verdict"):
        table.add_column(col, justify="left" if col in ("prefill", "decode", "verdict") else "right")
    for n, c in enumerate(shown):
        verdict = Text("ok", style="green") if c.ok else Text(_cell(c.problems), style="red")
        kv = "-" if c.kv is None else f"{c.kv.transfer_ms:.1f}"
        table.add_row(str(n), c.prefill.short(), f"{c.decode.short()} (batch {c.decode.max_running_requests})",
                      str(c.gpus_used), f"{c.row['ttft']:g}", kv, f"{c.ttft_ms:.1f}", f"{c.itl_ms:g}",
                      f"{c.tokens_per_s_per_gpu:.1f}", verdict)
    if not out.is_terminal:
        out.width = max(out.width, 160)
    out.print(table)
    rejected = [c for c in result.candidates if not c.ok]
    if result.ok and rejected:
        counts: dict[str, int] = {}
        for c in rejected:
            for p in c.problems:
                counts[p["rule"]] = counts.get(p["rule"], 0) + 1
        out.print(f"{len(rejected)} rejected deployments: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())),
                  highlight=False)
    if result.aic_answer:
        from pdctl.suggest.candidate import from_row

        a = result.aic_answer[0]
        out.print(f"AIConfigurator alone (same-TP gate, no KV term, no rules): {from_row(a, i['gpus']).label()} "
                  f"(decode batch {a['(d)global_bs']}), TTFT {a['ttft']:g} ms, ITL {a['tpot']:g} ms, "
                  f"{a['tokens/s/gpu_cluster']:.1f} tok/s/GPU", highlight=False)


@click.command("suggest")
@click.argument("topology", required=False, type=click.Path(dir_okay=False))
@click.option("--model", help="Model: gpt-oss-120b, gpt-oss-20b, llama-3.1-8b, deepseek-v3 (or its HF id).")
@click.option("--system", help="GPU kind: gb300, gb200, b200, h200, h100.")
@click.option("--gpus", type=int, help="GPUs to deploy on (with a TOPOLOGY: at most its GPUs).")
@click.option("--isl", type=int, required=True, help="Input (prompt) length in tokens.")
@click.option("--osl", type=int, required=True, help="Output length in tokens.")
@click.option("--ttft", "ttft_ms", type=float, required=True, help="Time-to-first-token target, ms.")
@click.option("--itl", "itl_ms", type=float, required=True, help="Inter-token latency target, ms.")
@click.option("--backend", type=click.Choice(NAMES), help="KV transfer backend [default: the "
              "topology's, else nixl].")
@click.option("--version", help="SGLang version whose rules judge the candidates [default: engine.version, else "
              "0.5.23].")
@click.option("--link-gbps", type=FiniteFloatRange(min=0, min_open=True),
              help="KV link bandwidth per prefill GPU, GB/s (400 Gb/s InfiniBand = 50) [default: the GPU's NIC].")
@click.option("--us-per-descriptor", type=FiniteFloatRange(min=0),
              help="Cost of one transfer descriptor, µs [default: 1, assumed].")
@click.option("--transfer-from", type=click.Path(dir_okay=False),
              help="A bench-transfer or preflight --json document: the measured link.")
@click.option("--top", type=click.IntRange(min=1), default=10, show_default=True, help="Candidates shown.")
@click.option("--out", "out_path", type=click.Path(dir_okay=False), callback=writable,
              help="Write the best candidate as a topology file here.")
@click.option("--aic-answer", is_flag=True, help="Also show AIConfigurator's own answer for the same inputs.")
@click.option("--no-cache", is_flag=True, help="Recompute AIConfigurator's sweep (it still refreshes the cache).")
@json_option("the candidates")
def suggest(topology: str | None, out_path: str | None, json_path: str | None, aic_answer: bool, no_cache: bool,
            **options: Any) -> None:
    """The PD topology to run under TTFT/ITL targets: AIConfigurator's model (heterogeneous TP included),
    SGLang's rules (check-compat on every candidate) and the KV transfer priced in.

    Give --model/--system/--gpus, or a TOPOLOGY skeleton (its model, nodes, SGLang version and transfer
    backend are used). Exit 0 with the best candidate (written to --out), 1 when none meets the targets, 2 on
    bad input.
    """
    from pdctl.extras import require
    from pdctl.suggest.request import SuggestRequest, resolve

    inputs = resolve(SuggestRequest(topology=topology, **options))  # bad input first, before the heavy part
    require("aiconfigurator", "pandas", what="pdctl suggest")
    from pdctl.suggest.cache import Cache
    from pdctl.suggest.output import write_topology
    from pdctl.suggest.run import suggest as run

    out = err_console if json_path == "-" else console
    store = Cache(read=not no_cache)
    with out.status("suggest: starting", spinner="dots") as status:
        def say(text: str) -> None:
            if out.is_terminal:
                status.update(f"suggest: {text}")
            else:
                out.print(f"suggest: {text}", highlight=False, markup=False)

        result = run(inputs, store=store, say=say, with_aic_answer=aic_answer)
    render(result, out, inputs.top)
    doc = result.document()
    if result.ok and out_path:
        doc["out"] = write_topology(result, out_path)
        out.print(f"wrote {out_path}: {result.candidates[0].label()}", highlight=False)
    write_json(json_path, doc)
    if not result.ok:
        misses = result.nearest_misses(3)
        detail = "\n".join(f"  {c.label()}: {_cell(c.problems)}" for c in misses)
        raise CheckFailed(f"no candidate meets TTFT {inputs.ttft_ms:g} ms / ITL {inputs.itl_ms:g} ms on {inputs.gpus} "
                          f"{inputs.system} GPUs; nearest misses:\n{detail}")
