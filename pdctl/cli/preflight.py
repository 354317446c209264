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


def transfers_option(func: Any) -> Any:
    return click.option(
        "--transfers", type=click.Choice(["cover", "all-pairs"]), default="cover", show_default=True,
        help="cover: about max(P, D) transfer pairs covering every prefill and decode node and each link class "
        "(same host, NVLink domain, cross-node); all-pairs: every prefill x decode pair (to chase one link). "
        "Both run in rounds, each round's pairs in parallel.",
    )(func)


def deadline_option(func: Any) -> Any:
    from pdctl.preflight.runner import DEFAULT_DEADLINE_S

    return click.option(
        "--deadline", type=FiniteFloatRange(min=1), default=DEFAULT_DEADLINE_S, show_default=True,
        help="Seconds for the whole preflight (probes and every transfer round); what still runs then is named "
        "and preflight fails. `pdctl launch` runs its preflight with this default.",
    )(func)


@click.command("preflight")
@click.argument("topology", type=click.Path(dir_okay=False))
@json_option("the preflight report")
@click.option("--skip-transfer", is_flag=True, help="Do not run the cross-node KV transfer test.")
@transfers_option
@deadline_option
@tokens_option
@node_timeout_option
@executor_option
@set_option
def preflight(
    topology: str, json_path: str | None, skip_transfer: bool, transfers: str, deadline: float, tokens: int,
    node_timeout: float, executor: str, overrides: tuple[str, ...], cluster: str | None,
) -> None:
    """Facts and checks per node (reach, versions, GPUs, RDMA, model, ports, addresses) and real KV transfers
    covering every prefill and decode node; exit 1 on any failed check. Progress goes to stderr."""
    from pdctl.cli.progress import StatusLines
    from pdctl.errors import CheckFailed
    from pdctl.launch.deploy import check_nodes

    out = err_console if json_path == "-" else console
    topo = read_topology(topology, overrides, cluster)
    with StatusLines("preflight") as say:
        report = check_nodes(topo, executor=executor, skip_transfer=skip_transfer, tokens=tokens,
                             timeout=node_timeout, progress=say, transfers=transfers, deadline=deadline)
    print_report(report, out)
    write_json(json_path, report.to_json())
    if not report.ok:
        raise CheckFailed(report.summary())


def _names(names: list[str], of: int) -> str:
    return f"all {of} nodes" if len(names) == of and of > 1 else ", ".join(names)


def print_report(report: Any, out: Any) -> None:
    """Readable at 64 nodes: one row per node (roles, host, how it answered), the checks that did not pass
    grouped across the nodes that share them, the ids of those that passed everywhere, the transfer plan and
    its results, then the verdict. The JSON holds every check of every node."""
    from rich.markup import escape
    from rich.table import Table

    nodes = Table(title=f"preflight of {escape(report.topology)}: {len(report.nodes)} node(s)", title_justify="left",
                  show_edge=False)
    for col in ("node", "host", "roles", "executor", "hostname", "probe s", "result"):
        nodes.add_column(col, overflow="fold")
    groups: dict[tuple[Any, ...], list[str]] = {}
    passed: dict[str, int] = {}
    for node in report.nodes:
        bad = [c for c in node.checks if not c.ok]
        fails = sum(1 for c in bad if c.severity == "error")
        result = ("[green]ok[/]" if not bad else
                  ", ".join(x for x in (f"[red]{fails} FAIL[/]" if fails else "",
                                        f"[yellow]{len(bad) - fails} warn[/]" if len(bad) > fails else "") if x))
        facts = node.facts
        nodes.add_row(node.node, escape(str(node.host)), ", ".join(node.roles) or "-", str(facts.get("executor")),
                      escape(str(facts.get("hostname") or "-")), f"{facts.get('probe_s', 0):.1f}", result)
        for check in node.checks:
            if check.ok:
                passed[check.check] = passed.get(check.check, 0) + 1
            else:
                groups.setdefault((check.check, check.severity, check.message, check.fix), []).append(node.node)
    out.print(nodes)
    out.print()
    if groups:
        findings = Table(title="findings (identical ones grouped across nodes)", title_justify="left", show_edge=False)
        for col in ("check", "", "nodes", "found / why"):
            findings.add_column(col, overflow="fold", no_wrap=col in ("check", ""))
        for (check, severity, message, fix), names in sorted(groups.items(), key=lambda g: g[0][1] != "error"):
            mark = MARKS[False] if severity == "error" else "[yellow]warn[/]"
            text = escape(message) + (f"\n[dim]fix: {escape(fix)}[/]" if fix else "")
            findings.add_row(check, mark, _names(names, len(report.nodes)), text)
        out.print(findings)
        out.print()
    if passed:
        out.print("[green]passed[/]: " + ", ".join(f"{c} ({n})" if n > 1 else c for c, n in passed.items()),
                  highlight=False, soft_wrap=False)
    _print_transfers(report, out)
    for note in report.notes:
        out.print(f"[dim]note: {escape(note)}[/]")
    if report.expired:
        out.print(f"[red]deadline ({report.deadline_s:g}s) expired[/]; still running: {escape(', '.join(report.expired))}")
    verdict = "[bold green]preflight passed[/]" if report.ok else "[bold red]preflight failed[/]"
    out.print(f"{verdict} ({len(report.nodes)} node(s), {report.wall_s:.1f}s)")


def _plan_line(report: Any) -> str | None:
    plan = report.transfer_plan
    if not plan:
        return None
    return (f"transfer plan ({plan['mode']}): {len(plan['pairs'])} pair(s) in {len(plan['rounds'])} round(s), "
            f"{len(report.agents)} agent(s)")


def _print_transfers(report: Any, out: Any) -> None:
    from rich.markup import escape
    from rich.table import Table

    line = _plan_line(report)
    if line:
        out.print(line, highlight=False)
    if report.transfers:
        table = Table(title="KV transfers (bench-transfer between the nodes)", title_justify="left", show_edge=False)
        for col in ("from", "to", "stack", "backend", "path", "GB/s", "us/desc", "verified"):
            table.add_column(col, justify="right" if col in ("GB/s", "us/desc") else "left",
                             no_wrap=col in ("stack", "GB/s", "us/desc"))
        for t in report.transfers:
            table.add_row(t.source, t.target, stack_words(t), t.backend, escape(t.transport), f"{t.gbps:.3f}",
                          f"{t.us_per_descriptor:.1f}", MARKS[t.ok] if t.ok else f"[red]NO[/] {escape(t.error or '')}")
        out.print(table)
        said: dict[str, list[str]] = {}  # each note once, with the pairs it is about (readable at 64 nodes)
        for t in report.transfers:
            whys = [t.details["why"]] if t.details.get("stack") == "pdctl" and "instead" in str(t.details.get("why")) else []
            for text in [*whys, *(f"CPU rehearsal: {b}" for b in t.details.get("guards_bypassed") or [])]:
                said.setdefault(text, []).append(f"{t.source} -> {t.target}")
        for text, pairs in said.items():
            out.print(f"[yellow]note[/] ({escape(', '.join(pairs[:3]))}{', ...' if len(pairs) > 3 else ''}): "
                      f"{escape(text)}", highlight=False)


BRIEF_ROWS = 8  # a passed preflight lists its transfers one per line up to this many, else sums them up


def stack_words(t: Any) -> str:
    """Whose transfer code ran a pair's test: 'sglang 0.5.23 (VRAM)' or 'pdctl'."""
    if t.details.get("stack") != "sglang":
        return "pdctl"
    return f"sglang {t.details.get('sglang_version') or ''} ({t.details.get('memory', 'DRAM')})".replace("  ", " ")


def print_brief(report: Any, out: Any) -> None:
    """A passed preflight in a few lines (what `pdctl launch` prints before starting): the plan, then each
    transfer (GB/s, us per descriptor, the path) — or, past BRIEF_ROWS of them, the slowest and the paths."""
    from rich.markup import escape

    out.print(f"[green]preflight passed[/]: {len(report.nodes)} node(s) in {report.wall_s:.1f}s")
    line = _plan_line(report)
    if line:
        out.print(f"  {line}", highlight=False)
    if len(report.transfers) > BRIEF_ROWS:
        slowest = min(report.transfers, key=lambda t: t.gbps)
        paths = sorted({t.transport for t in report.transfers})
        stacks = sorted({stack_words(t) for t in report.transfers})
        out.print(f"  {len(report.transfers)} transfers verified ({escape(', '.join(stacks))}); slowest "
                  f"{slowest.source} -> {slowest.target} {slowest.gbps:.3f} GB/s; over {escape(', '.join(paths))}",
                  highlight=False)
    else:
        for t in report.transfers:
            stack = f" ({stack_words(t)})" if t.details.get("stack") == "sglang" else ""
            out.print(f"  transfer {t.source} -> {t.target}{stack}: {t.gbps:.3f} GB/s, "
                      f"{t.us_per_descriptor:.1f} us/descriptor over {escape(t.transport)}", highlight=False)
    for note in report.notes:
        out.print(f"  [dim]note: {escape(note)}[/]")
