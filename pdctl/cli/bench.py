"""`pdctl bench-transfer TOPOLOGY`: one request's KV moved between real ranks (options and printing only).

The work lives in pdctl.bench.transfer.run (imported when the command runs: it needs numpy and the backends).
"""

from __future__ import annotations

from typing import Any

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import json_option, read_topology, set_option
from pdctl.errors import CheckFailed
from pdctl.transfer.registry import NAMES, STACK_NAMES, stack


def print_result(doc: dict[str, Any], note: str, out: Any) -> None:
    """The human view of a bench-transfer document (also used by benchmarks/bench_transfer.py)."""
    from rich.table import Table

    out.print(
        f"[bold]{doc['topology']}[/]: {doc['backend']}, {doc['tokens']} tokens, page {doc['page_size']}, "
        f"{doc['full_layers']} full + {doc['swa_layers']} SWA layers ({doc['full_pages']} + {doc['swa_pages']} "
        f"pages), {doc['kv_heads']} KV heads x {doc['head_dim']} x {doc['elem_bytes']:g} B",
        highlight=False,
    )
    out.print(note, highlight=False)
    table = Table(title=f"memcpy of the same bytes: {doc['memcpy_gbps']:.2f} GB/s", title_justify="left")
    for col in ("path", "descriptors", "MB", "seconds", "GB/s", "x memcpy", "wire GB/s", "verified"):
        table.add_column(col, justify="right" if col not in ("path", "verified") else "left")
    for p in doc["paths"].values():
        table.add_row(
            p["kind"],
            f"{p['descriptors']:,}",
            f"{p['bytes'] / 1e6:.1f}",
            f"{p['seconds']:.3f}",
            f"{p['gbps']:.2f}",
            f"{p['ratio_to_memcpy']:.0%}",
            f"{p['wire_gbps']:.2f}",
            "[green]yes[/]" if p["verified"] else f"[red]NO ({p['mismatched_bytes']} bytes wrong)[/]",
        )
    out.print(table)


@click.command("bench-transfer")
@click.argument("topology", type=click.Path(dir_okay=False))
@click.option(
    "--backend",
    type=click.Choice(list(NAMES)),
    default=None,
    help="Transfer backend (default: the topology's transfer.backend).",
)
@click.option(
    "--tokens",
    type=click.IntRange(min=1),
    default=8192,
    show_default=True,
    help="Prompt tokens of the request whose KV is moved.",
)
@click.option(
    "--repeats",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Rounds of memcpy / per-token / packed measured side by side; the best of each is reported.",
)
@click.option(
    "--stack",
    "stack_name",
    type=click.Choice(list(STACK_NAMES)),
    default=None,
    help="Whose transfer code moves the KV: pdctl's own (per-token and packed paths) or SGLang's own KV "
    "managers, senders, receivers and bootstrap server (default: the topology's transfer.stack).",
)
@click.option("--skip-compat", is_flag=True,
              help="Run even if check-compat rejects the topology (to see SGLang fail live, or not).")
@json_option("the result")
@set_option
def bench_transfer(
    topology: str, backend: str | None, tokens: int, repeats: int, stack_name: str | None, skip_compat: bool,
    json_path: str | None, overrides: tuple[str, ...], cluster: str | None,
) -> None:
    """Move one request's KV between real prefill and decode ranks on this machine and time it.

    --stack pdctl: two paths carry the same bytes: SGLang's address rule (per-token head slices when the TPs
    differ, whole pages when equal) and a packed one (one descriptor per page run, gather/scatter through
    staging). --stack sglang: SGLang's own stack moves the request, in SGLang's interpreter. Every byte is
    verified; throughput is reported against a plain memcpy of the same bytes measured in the same run.
    """
    topo = read_topology(topology, overrides, cluster)
    chosen = stack(stack_name or topo.transfer.stack)
    out = err_console if json_path == "-" else console
    if chosen.sglang_code:
        from pdctl.bench.transfer.sglang_run import run_sglang_bench

        with out.status(f"moving {tokens} tokens of KV through SGLang's stack ...") as status:
            doc = run_sglang_bench(topo, backend=backend, tokens=tokens, repeats=repeats, skip_compat=skip_compat,
                                   progress=lambda m: status.update(m))
        print_sglang_result(doc, out)
        write_json(json_path, doc)
        if not doc["ok"]:
            raise CheckFailed(sglang_failure(doc))
        return
    # the bench loads numpy (the engine extra): its --help and bad input must work on a CLI-only install
    from pdctl.bench.transfer.prediction import run_pdctl_bench
    from pdctl.bench.transfer.run import config_from_topology, heads_note

    cfg = config_from_topology(topo, backend=backend, tokens=tokens, repeats=repeats)
    with out.status(f"moving {tokens} tokens of KV over {cfg.backend} ..."):
        doc = run_pdctl_bench(topo, cfg, skip_compat=skip_compat)
    if doc.get("refused"):
        write_json(json_path, doc)
        raise CheckFailed(doc["error"])
    print_result(doc, heads_note(cfg), out)
    write_json(json_path, doc)
    if not doc["ok"]:
        raise CheckFailed("KV bytes on the decode side differ from the prefill's: the transfer is wrong")


def sglang_failure(doc: dict[str, Any]) -> str:
    """The exit-1 message of a failed or refused bench on SGLang's stack."""
    if doc.get("refused"):
        return str(doc["error"])
    if doc["verified"]:
        return (f"SGLang's stack moved every byte, but check-compat predicted a failure at "
                f"{doc['predicted_stage']}: one of them is wrong")
    said = ("as check-compat predicted" if doc["agrees_with_compat"] else
            f"check-compat predicted {'success' if doc['predicted_ok'] else doc['predicted_stage']}")
    return f"SGLang's stack failed at {doc['stage']} ({said}): {doc['error']}"


def print_sglang_result(doc: dict[str, Any], out: Any) -> None:
    """The human view of a bench-transfer document from SGLang's stack."""
    from rich.table import Table

    out.print(
        f"[bold]{doc['topology']}[/]: SGLang {doc['sglang_version'] or '?'} stack, {doc['backend']}, "
        f"{doc['tokens']} tokens, prefill TP{doc['prefill_tp']} -> decode TP{doc['decode_tp']}, page "
        f"{doc['page_size']}, {doc['full_layers']} full + {doc['swa_layers']} SWA"
        + (f" + {doc['linear_layers']} linear-attention" if doc.get("linear_layers") else "")
        + f" layers, {doc['kv_heads']} KV heads x {doc['head_dim']} x {doc['elem_bytes']:g} B, {doc['memory']}",
        highlight=False,
    )
    if doc.get("refused"):
        out.print(f"[red]refused[/]: {doc['error']}", highlight=False)
        return
    table = Table(title=f"memcpy of the same bytes: {doc.get('memcpy_gbps', 0):.2f} GB/s", title_justify="left")
    for col in ("stack", "descriptors", "MB", "seconds", "GB/s", "x memcpy", "transport", "verified"):
        table.add_column(col, justify="right" if col not in ("stack", "transport", "verified") else "left")
    table.add_row("sglang", f"{doc['descriptors']:,}", f"{doc['bytes'] / 1e6:.1f}", f"{doc['seconds']:.3f}",
                  f"{doc['gbps']:.2f}", f"{doc.get('ratio_to_memcpy', 0):.0%}", str(doc["transport"]),
                  "[green]yes[/]" if doc["verified"] else f"[red]NO: {doc['stage']}[/]")
    out.print(table)
    if doc.get("state_bytes"):
        out.print(f"of which mamba state (conv + SSM, {doc['linear_layers']} linear-attention layers): "
                  f"{doc['state_bytes']:,} B on the decode side, checked byte for byte", highlight=False)
    if doc["error"]:
        out.print(f"[red]{doc['stage']}[/]: {doc['error']}", highlight=False, soft_wrap=True)
    compat = "passes" if doc["compat_ok"] else "rejects (" + ", ".join(
        f"{r['rule']} at {r['stage']}" for r in doc["predicted_rules"] + doc["not_rehearsed"]) + ")"
    agree = "[green]agrees[/]" if doc["agrees_with_compat"] else "[red]DISAGREES[/]"
    out.print(f"check-compat {compat}; the live result {agree}", highlight=False, soft_wrap=True)
    for note in doc["guards_bypassed"]:
        out.print(f"[yellow]CPU rehearsal[/]: {note}", highlight=False, soft_wrap=True)
