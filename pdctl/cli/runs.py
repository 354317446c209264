"""`pdctl runs`: option parsing and printing only (the list: pdctl.launch.runlist)."""

from __future__ import annotations

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import json_option

STYLE = {"running": "green", "degraded": "bold red", "dead": "red", "failed": "red", "stopped": "dim",
         "unreadable": "yellow"}


@click.command("runs")
@json_option("the list of runs")
def runs(json_path: str | None) -> None:
    """Past and live runs launched from this directory, newest first: name, state, started, router, run dir.

    A run whose state says running is checked: `degraded` when some of its processes are gone (named), `dead`
    when all are. `*` marks the latest run (what status/logs/down/eval use without --run-dir)."""
    from rich.table import Table
    from rich.text import Text

    from pdctl.launch.runlist import list_runs

    rows = list_runs()
    out = err_console if json_path == "-" else console
    if not rows:
        out.print("no runs here (`pdctl launch` records them under ./.pdctl)")
    else:
        table = Table(show_edge=False)
        for col in ("", "name", "state", "started", "router"):
            table.add_column(col, no_wrap=True)
        table.add_column("run dir", overflow="fold", ratio=1)
        for row in rows:
            table.add_row("*" if row.latest else "", Text(row.name), Text(row.state, style=STYLE.get(row.state, "")),
                          row.started or "", row.router or "", Text(row.run_dir))
        out.print(table)
        for row in rows:  # why a run is degraded, dead or unreadable: on its own line, never squeezed
            if row.detail and row.state not in ("running", "stopped"):
                out.print(Text(f"{row.name} ({row.state}): {row.detail}"), soft_wrap=True)
    write_json(json_path, {"runs": [r.to_json() for r in rows]})
