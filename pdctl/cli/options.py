"""Click options shared by several commands, so one option reads and behaves the same everywhere."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

run_dir_option = click.option(
    "--run-dir", type=click.Path(file_okay=False), default=None, help="Run directory (default: latest)."
)
"""`--run-dir` of the commands that act on an existing run (status, logs, down): default is the latest run."""


def json_option(what: str) -> Callable[[Any], Any]:
    """`--json PATH` (into the `json_path` parameter) of a command that writes WHAT as a JSON document;
    '-' = stdout (human output then goes to stderr). A directory is refused while parsing, before the
    command does any work; other unwritable paths fail in `write_json`."""
    return click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False, allow_dash=True),
        metavar="PATH",
        default=None,
        help=f"Write {what} as JSON to PATH ('-' = stdout).",
    )
