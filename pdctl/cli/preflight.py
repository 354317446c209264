"""`pdctl preflight TOPOLOGY`: check the actual nodes before launch (options and printing only; the work is in
pdctl.preflight)."""

from __future__ import annotations

from typing import Any

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import FiniteFloatRange, json_option, read_topology, set_option

MARKS = {True: "[green]ok[/]", False: "[red]FAIL[/]"}


def executor_option(func: Any) -> Any:
    return click.option(
        "--executor",
        type=click.Choice(["auto", "slurm"]),
        default="auto",
        show_default=True,
        help="auto: slurm when the topology has a slurm: section, else ssh for nodes with ssh: and this machine for "
        "the others; slurm: srun on the Slurm node named by host (inside an allocation: its nodes).",
    )(func)


def tokens_option(func: Any) -> Any:
    return click.option(
        "--tokens", type=click.IntRange(min=1), default=1024, show_default=True,
        help="Prompt tokens of the request whose KV the transfer test moves.",
    )(func)


def node_timeout_option(func: Any) -> Any:
    return click.option(
        "--node-timeout", type=FiniteFloatRange(min=1), default=60.0, show_default=True,
        help="Seconds each node has to answer the probe.",
    )(func)


@click.command("preflight")
@click.argument("topology", type=click.Path(dir_okay=False))
@json_option("the preflight report")
@click.option("--skip-transfer", is_flag=True, help="Do not run the cross-node KV transfer test.")
@tokens_option
@node_timeout_option
@executor_option
@set_option
def preflight(
    topology: str, json_path: str | None, skip_transfer: bool, tokens: int, node_timeout: float, executor: str,
    overrides: tuple[str, ...], cluster: str | None,
) -> None:
    """Facts and checks per node (reach, versions, GPUs, RDMA, model, ports, addresses) and a real KV transfer
    between each prefill and decode node; exit 1 on any failed check."""
    from pdctl.errors import CheckFailed
    from pdctl.launch.deploy import check_nodes

    out = err_console if json_path == "-" else console
    topo = read_topology(topology, overrides, cluster)
    with out.status("preflight") as status:
        report = check_nodes(topo, executor=executor, skip_transfer=skip_transfer, tokens=tokens,
                             timeout=node_timeout, progress=lambda msg: status.update(f"preflight: {msg}"))
    print_report(report, out)
    write_json(json_path, report.to_json())
    if not report.ok:
        raise CheckFailed(report.summary())


def print_report(report: Any, out: Any) -> None:
    """Per node a table of checks, then the transfers, then the verdict."""
    from rich.markup import escape
    from rich.table import Table

    for node in report.nodes:
        facts = node.facts
        title = (f"[bold]{node.node}[/] ({node.host}; advertises {facts.get('advertise')}) — "
                 f"{', '.join(node.roles) or 'no role'} — {facts.get('executor')}, {facts.get('python')}")
        table = Table(title=title, title_justify="left", show_edge=False, expand=False)
        table.add_column("check", no_wrap=True)
        table.add_column("", no_wrap=True)
        table.add_column("found / why", overflow="fold")
        for check in node.checks:
            mark = MARKS[True] if check.ok else (MARKS[False] if check.severity == "error" else "[yellow]warn[/]")
            text = escape(check.message) + (f"\n[dim]fix: {escape(check.fix)}[/]" if check.fix and not check.ok else "")
            table.add_row(check.check, mark, text)
        out.print(table)
        out.print()
    if report.transfers:
        table = Table(title="cross-node KV transfer (bench-transfer between the nodes)", title_justify="left")
        for col in ("from", "to", "backend", "path", "GB/s", "us/desc", "verified"):
            table.add_column(col, justify="right" if col in ("GB/s", "us/desc") else "left")
        for t in report.transfers:
            table.add_row(t.source, t.target, t.backend, escape(t.transport), f"{t.gbps:.3f}",
                          f"{t.us_per_descriptor:.1f}", MARKS[t.ok] if t.ok else f"[red]NO[/] {escape(t.error or '')}")
        out.print(table)
    for note in report.notes:
        out.print(f"[dim]note: {escape(note)}[/]")
    verdict = "[bold green]preflight passed[/]" if report.ok else "[bold red]preflight failed[/]"
    out.print(f"{verdict} ({len(report.nodes)} node(s), {report.wall_s:.1f}s)")


def print_brief(report: Any, out: Any) -> None:
    """A passed preflight in a few lines (what `pdctl launch` prints before starting)."""
    from rich.markup import escape

    out.print(f"[green]preflight passed[/]: {len(report.nodes)} node(s) in {report.wall_s:.1f}s")
    for t in report.transfers:
        out.print(f"  transfer {t.source} -> {t.target}: {t.gbps:.3f} GB/s, {t.us_per_descriptor:.1f} us/descriptor "
                  f"over {escape(t.transport)}", highlight=False)
    for note in report.notes:
        out.print(f"  [dim]note: {escape(note)}[/]")
