"""`pdctl bench-transfer TOPOLOGY`: one request's KV moved between real ranks (options and printing only).

The work lives in pdctl.bench.transfer.run (imported when the command runs: it needs numpy and the backends).
"""

from __future__ import annotations

from typing import Any

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import json_option, read_topology, set_option
from pdctl.errors import CheckFailed
from pdctl.transfer.registry import NAMES


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
@json_option("the result")
@set_option
def bench_transfer(
    topology: str, backend: str | None, tokens: int, repeats: int, json_path: str | None, overrides: tuple[str, ...],
    cluster: str | None,
) -> None:
    """Move one request's KV between real prefill and decode ranks on this machine and time it.

    Two paths carry the same bytes: SGLang's (per-token head slices when the TPs differ, whole pages when
    equal) and a packed one (one descriptor per page run, gather/scatter through staging). Every byte is
    verified; throughput is reported against a plain memcpy of the same bytes measured in the same run.
    """
    # the bench loads numpy (the engine extra): its --help and bad input must work on a CLI-only install
    from pdctl.bench.transfer.run import config_from_topology, heads_note, run_bench

    cfg = config_from_topology(read_topology(topology, overrides, cluster), backend=backend, tokens=tokens, repeats=repeats)
    out = err_console if json_path == "-" else console
    with out.status(f"moving {tokens} tokens of KV over {cfg.backend} ..."):
        doc = run_bench(cfg)
    print_result(doc, heads_note(cfg), out)
    write_json(json_path, doc)
    if not doc["ok"]:
        raise CheckFailed("KV bytes on the decode side differ from the prefill's: the transfer is wrong")
