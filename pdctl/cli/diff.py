"""`pdctl diff RUN_A RUN_B`: option parsing and printing only (the comparison: pdctl.runs.diff)."""

from __future__ import annotations

import json

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import json_option


def _text(value: object) -> str:
    if value is None:
        return "-"
    return value if isinstance(value, str) else json.dumps(value)


@click.command("diff")
@click.argument("run_a", type=click.Path(file_okay=False))
@click.argument("run_b", type=click.Path(file_okay=False))
@json_option("the differences")
def diff(run_a: str, run_b: str, json_path: str | None) -> None:
    """What differs between two runs (their lock.json): topology keys, versions, node facts, image, model.
    Exit 0 when they ran the same, 1 when something differs (as diff(1))."""
    from pathlib import Path

    from rich.table import Table
    from rich.text import Text

    from pdctl.errors import CheckFailed
    from pdctl.runs.diff import diff_runs

    doc = diff_runs(Path(run_a), Path(run_b))
    out = err_console if json_path == "-" else console
    if doc["same"]:
        out.print(f"[green]same[/]: {run_a} and {run_b} ran the same topology, versions and nodes", highlight=False)
    else:
        table = Table(title=f"{len(doc['differences'])} difference(s)")
        for col in ("key", run_a, run_b):
            table.add_column(col, overflow="fold")
        for row in doc["differences"]:
            table.add_row(Text(row["key"]), Text(_text(row["a"])), Text(_text(row["b"])))
        out.print(table)
    write_json(json_path, doc)
    if not doc["same"]:
        raise CheckFailed(f"the runs differ in {len(doc['differences'])} key(s)")
