"""`pdctl check-compat`, `pdctl plan`, `pdctl schema`: option parsing and printing only.

The verdicts come from pdctl.compat, the numbers from pdctl.plan; this module turns them into rich tables
(stderr when `--json -` owns stdout) and exit codes (0 compatible, 1 incompatible, 2 bad input).
"""

from __future__ import annotations

import json
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import json_option, set_option
from pdctl.compat import compat_report
from pdctl.compat.evaluate import plan_report
from pdctl.compat.findings import NOT_APPLICABLE, compact_line, verdict
from pdctl.compat.sweeps import failed_rules, sweep_report
from pdctl.errors import CheckFailed, UserError
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology import load_topology
from pdctl.topology.profile import LoadedProfile, open_profile
from pdctl.topology.schema import topology_json_schema
from pdctl.topology.variants import SweepLoad, load_sweep

_VERDICT_STYLE = {"pass": "green", "FAIL": "bold red", "warn": "yellow", "note": "cyan", "n/a": "dim"}


def _human(n: float) -> str:
    """Bytes as B / KiB / MiB / GiB with 3 significant digits."""
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.3g} {unit}"
        n /= 1024
    return f"{n} B"


def _load(path: str, overrides: tuple[str, ...] = (), profile: LoadedProfile | None = None) -> tuple[Any, Any, Any]:
    """The topology at PATH (with --set OVERRIDES and the cluster PROFILE), its model spec, and its deployment
    rendered once (what check-compat judges)."""
    topo = load_topology(path, overrides, profile=profile)
    return _judged(topo)


def _judged(topo: Any) -> tuple[Any, Any, Any]:
    return topo, resolve_model_spec(topo.model, engine_kind=topo.engine.kind), render(topo)


def _failed(report: dict[str, Any]) -> list[str]:
    return failed_rules(report["findings"])


def _out(json_path: str | None) -> Console:
    return err_console if json_path == "-" else console


def _print_model(out: Console, model: dict[str, Any], attn_tp: dict[str, dict[str, Any]]) -> None:
    kv = "MLA latent " + f"{model['kv_lora_rank']}+{model['qk_rope_head_dim']}" if model["mla"] else (
        f"{model['num_kv_heads']} KV heads x head_dim {model['head_dim']}")
    swa = (f"{len(model['swa_layers'])} sliding (window {model['sliding_window']}) + "
           f"{len(model['full_layers'])} full" if model["hybrid_swa"] else f"{len(model['full_layers'])} full")
    if model.get("linear_layers"):
        swa += (f" + {len(model['linear_layers'])} linear attention (mamba state "
                f"{_human(model['state_bytes_per_request'])}/request at TP1)")
    if model.get("index_head_dim"):
        swa += f"; DSA indexer {model['index_head_dim']} ({model['indexer_bytes_per_token']:,} B/token)"
    out.print(f"[bold]model[/] {model['name']}  ({model['source']})", highlight=False)
    out.print(f"  {model['num_layers']} layers: {swa}; {model['num_attention_heads']} attention heads; {kv}",
              highlight=False)
    parts = []
    for role, info in attn_tp.items():
        dp = f" / dp {info['dp']} (dp attention)" if info["enable_dp_attention"] else ""
        parts.append(f"{role} tp {info['tp']}{dp} pp {info['pp']} -> attention TP {info['attn_tp']}")
    out.print("  " + "; ".join(parts), highlight=False)


def _engine_words(info: dict[str, Any]) -> str:
    """'SGLang 0.5.23' / 'SGLang 0.5.23 (assumed)' / 'the reference engine', for titles."""
    if info["engine"] != "sglang":
        return "the reference engine"
    return f"SGLang {info['version']}" + (" (assumed)" if info["source"] == "assumed" else "")


def _print_version(out: Console, info: dict[str, Any]) -> None:
    """Which SGLang version judged the commands, and why: pinned, asked from the nodes, or assumed."""
    if info["engine"] != "sglang":
        return
    how = {"engine.version": "engine.version", "nodes": "reported by the nodes", "assumed": "assumed"}
    line = f"[bold]SGLang {info['version']}[/] ({how.get(info['source'], info['source'])}; flag table {info['table']})"
    out.print(line, highlight=False)
    if info.get("note"):
        out.print(f"  [yellow]note:[/] {info['note']}", highlight=False)


def _print_findings(out: Console, findings: list[dict[str, Any]], engine: str) -> None:
    """Every rule, one row each: rule ids and verdicts never wrap (a name split mid-word cannot be searched
    for); only the message wraps, at word boundaries. The fixes of what failed follow the table
    (_print_actions), so the table has no fix column to squeeze it."""
    table = Table(title=f"compatibility rules ({engine})", show_lines=False, expand=False)
    table.add_column("rule", no_wrap=True)
    table.add_column("verdict", no_wrap=True)
    table.add_column("stage", no_wrap=True)
    table.add_column("message", overflow="fold", ratio=1)
    for f in findings:
        word = "n/a" if f["ok"] and f["message"] == NOT_APPLICABLE else verdict(f["severity"], f["ok"])
        stage = "" if f["ok"] else f["stage"]
        # Text, not markup: messages quote user input and SGLang's texts, which may hold [brackets]
        table.add_row(Text(f["rule"]), Text(word, style=_VERDICT_STYLE[word]), Text(stage), Text(f["message"]))
    out.print(table)


def _print_actions(out: Console, findings: list[dict[str, Any]]) -> None:
    """What to act on, last: every fired warning and note in the compact 'rule (stage): message (fix)' form
    (the errors end the output as the error's detail, in the same form)."""
    for f in findings:
        if not f["ok"] and f["severity"] != "error":
            word = "warning" if f["severity"] == "warning" else "note"
            out.print(Text(f"{word}: ", style=_VERDICT_STYLE[verdict(f["severity"], False)]) + Text(compact_line(f)),
                      soft_wrap=True)


def _print_heads(out: Console, heads: list[dict[str, Any]], mla: bool) -> None:
    if not heads:
        return
    title = "head ownership (MLA: one latent, replicated)" if mla else "KV head ownership per decode rank"
    table = Table(title=title)
    for col in ("decode rank", "model heads", "from prefill rank", "src heads", "-> dst heads"):
        table.add_column(col)
    for row in heads:
        first = True
        for s in row["sources"]:
            g = row["global_heads"]
            table.add_row(
                str(row["decode_rank"]) if first else "", f"[{g[0]}, {g[1]})" if first else "",
                str(s["prefill_rank"]),
                f"[{s['src_head_start']}, {s['src_head_start'] + s['num_heads']})",
                f"[{s['dst_head_start']}, {s['dst_head_start'] + s['num_heads']})",
            )
            first = False
    out.print(table)


def _print_transfer(out: Console, plan: dict[str, Any] | None) -> None:
    if not plan:
        return
    path = {"page": "whole pages (equal TP), contiguous runs merged",
            "head-slice": "per-token head slices (unequal TP)",
            "staging": "staging buffer: one bulk write per prefill rank per send (unequal TP)",
            "mla": "whole pages of the MLA latent"}[plan["path"]]
    chunk = plan["chunk_tokens"] if plan["chunk_tokens"] and plan["chunk_tokens"] > 0 else "off"
    table = Table(title=f"one request of {plan['tokens']} tokens in {plan['sends']} send(s) (chunked prefill "
                        f"{chunk}): {path}, page_size {plan['page_size']}, "
                        f"{plan['kv_cache_dtype']} ({plan['dtype_bytes']:g} B/elem)")
    for col in ("P rank", "D rank", "heads src -> dst", "full: descr / bytes", "SWA: descr / bytes",
                "total: descr / bytes"):
        table.add_column(col, justify="right")
    for p in plan["pairs"]:
        table.add_row(
            str(p["prefill_rank"]), str(p["decode_rank"]),
            f"{p['src_head_start']}+{p['num_heads']} -> {p['dst_head_start']}",
            f"{p['full_descriptors']:,} / {_human(p['full_bytes'])}",
            f"{p['swa_descriptors']:,} / {_human(p['swa_bytes'])}",
            f"{p['descriptors']:,} / {_human(p['bytes'])}",
        )
    out.print(table)
    out.print(
        f"  {plan['full_layers']} full-attention layers x {plan['full_pages']} pages; {plan['swa_layers']} SWA "
        f"layers x {plan['swa_pages']} window pages; total {plan['total_descriptors']:,} descriptors, "
        f"{_human(plan['total_bytes'])}", highlight=False,
    )
    for st in plan.get("states", []):
        out.print(f"  + {st['kind']} state ({st['layers']} layers): {_human(st['bytes_per_decode_rank'])} per decode "
                  f"rank x {st['decode_ranks']} = {_human(st['bytes'])}; {st['how']}", highlight=False)


@click.command("check-compat")
@click.argument("topology", type=click.Path(dir_okay=True))
@json_option("the report")
@click.option("--tokens", type=click.IntRange(min=1), default=8192, show_default=True,
              help="Prompt length of the request whose transfer is counted.")
@click.option("--failures-only", "-q", is_flag=True,
              help="Only what fails (and fired warnings), each with its fix, and the verdict: no tables.")
@set_option
def check_compat(topology: str, json_path: str | None, tokens: int, failures_only: bool,
                 overrides: tuple[str, ...], cluster: str | None) -> None:
    """Check TOPOLOGY's rendered commands against every rule of the SGLang version that runs them (exit 1 if
    any error fails). engine.version picks the version; without it, pdctl says which one it assumed.

    The output ends with what to act on: each failed rule as 'rule (SGLang fails at: stage): message (fix: ...)'.
    A colocated (non-PD) topology is checked against the rules about single servers only. A topology with
    `sweep:` is judged variant by variant: one table row per variant (exit 1 if any variant fails).
    """
    profile = open_profile(cluster)
    sweep = load_sweep(topology, overrides, profile=profile)
    if sweep is not None:
        _check_sweep(sweep, tokens, json_path, failures_only)
        return
    topo, spec, deployment = _load(topology, overrides, profile)
    report = compat_report(deployment, spec, tokens)
    out = _out(json_path)
    failed = _failed(report)
    if not failures_only:
        _print_version(out, report["sglang"])
        _print_model(out, report["model"], report["attn_tp"])
        _print_findings(out, report["findings"], _engine_words(report["sglang"]))
        if failed:  # a plan of something SGLang will not run would only be read by mistake
            out.print("[dim]no head map or transfer plan: the topology is incompatible "
                      "(`pdctl plan --force` shows them anyway)[/]", highlight=False)
        else:
            _print_heads(out, report["heads"], spec.mla)
            _print_transfer(out, report["transfer"])
    _print_actions(out, report["findings"])
    write_json(json_path, report)
    if failed:
        errors = [f for f in report["findings"] if f["severity"] == "error" and not f["ok"]]
        raise CheckFailed(f"{topo.name}: incompatible ({len(errors)} error(s)):",
                          detail="\n".join(f"- {compact_line(f)}" for f in errors))
    n = len(report["findings"])
    scope = f"all {n} rules" if topo.mode == "pd" else (
        f"the {sum(f['message'] != NOT_APPLICABLE for f in report['findings'])} of {n} rules that apply to a "
        "colocated topology")
    out.print(f"[bold green]compatible[/]: {topo.name} passes {scope}", highlight=False)


def _check_sweep(load: SweepLoad, tokens: int, json_path: str | None, failures_only: bool) -> None:
    """check-compat of every variant of a sweep: a table (variant, overrides, verdict, failed rules), the
    failed rules' lines per variant, and exit 1 if any variant fails."""
    def judge(topo: Any) -> dict[str, Any]:
        _, spec, deployment = _judged(topo)
        return compat_report(deployment, spec, tokens)

    doc = sweep_report(load, judge)
    out = _out(json_path)
    name = load.variants[0].topology.name if load.variants[0].topology else load.source.stem
    if not failures_only:
        table = Table(title=f"sweep {load.source.name}: {len(doc['variants'])} variant(s)")
        for col in ("variant", "overrides", "SGLang", "verdict", "failed rules"):
            table.add_column(col, overflow="fold")
        for v in doc["variants"]:
            word = "pass" if v["ok"] else "FAIL"
            version = v["sglang"]["version"] if v.get("sglang") else ""
            table.add_row(Text(v["name"]), Text(", ".join(f"{k}={val}" for k, val in v["overrides"].items())),
                          Text(str(version or "")), Text(word, style=_VERDICT_STYLE[word]),
                          Text(", ".join(failed_rules(v["findings"]))))
        out.print(table)
    write_json(json_path, doc)
    bad = [v for v in doc["variants"] if not v["ok"]]
    if bad:
        lines = [f"- {v['name']}: {compact_line(f)}" for v in bad for f in v["findings"]
                 if f["severity"] == "error" and not f["ok"]]
        raise CheckFailed(f"{name}: {len(bad)} of {len(doc['variants'])} variant(s) incompatible "
                          "(launch --keep-going runs only the others):", detail="\n".join(lines))
    out.print(f"[bold green]compatible[/]: every one of the {len(doc['variants'])} variants of {name} passes",
              highlight=False)


@click.command("plan")
@click.argument("topology", type=click.Path(dir_okay=True))
@click.option("--tokens", type=click.IntRange(min=1), default=8192, show_default=True,
              help="Prompt length of the request.")
@click.option("--prefix", "prefix_len", type=click.IntRange(min=0), default=0, show_default=True,
              help="Tokens of the prompt decode already holds (radix cache); only the rest is sent.")
@click.option("--force", is_flag=True,
              help="Show the plan even when check-compat rejects the topology (still exit 1).")
@json_option("the plan")
@set_option
def plan(topology: str, tokens: int, prefix_len: int, force: bool, json_path: str | None,
         overrides: tuple[str, ...], cluster: str | None) -> None:
    """Show the KV transfer plan of TOPOLOGY: head ownership and descriptors/bytes per rank pair.

    A topology check-compat rejects gets the findings and exit 1, not a plan of something that cannot run
    (with --force: the findings, then the plan, and still exit 1)."""
    topo, spec, deployment = _load(topology, overrides, open_profile(cluster))
    if prefix_len > tokens:
        raise UserError(f"--prefix ({prefix_len}) is longer than --tokens ({tokens})")
    topo.require_pd("plan")  # a colocated topology has no KV transfer to plan
    doc = plan_report(deployment, spec, tokens, prefix_len, force=force)
    out = _out(json_path)
    failed = [f["rule"] for f in doc["findings"]]
    if failed:
        _print_findings(out, doc["findings"], _engine_words(doc["sglang"]))
    if "transfer" in doc:
        _print_model(out, doc["model"], doc["attn_tp"])
        _print_heads(out, doc["heads"], spec.mla)
        _print_transfer(out, doc["transfer"])
        if doc["transfer"] is None:
            out.print("[yellow]no transfer plan: the attention TP sizes do not map onto each other[/]")
    write_json(json_path, doc)
    if failed:
        shown = "plan shown because of --force" if force else "no plan (--force shows it anyway)"
        raise CheckFailed(f"{topo.name}: incompatible ({', '.join(failed)}): {shown}; `pdctl check-compat` "
                          "explains each finding")


@click.command("schema")
def schema() -> None:
    """Print the JSON Schema of the topology file format."""
    click.echo(json.dumps(topology_json_schema(), indent=2))
