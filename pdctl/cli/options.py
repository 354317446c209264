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


JSON_FLAG = "--json"


def json_target(argv: list[str]) -> str | None:
    """The `--json PATH` of a command line, found without click (for the error document of a command that
    failed while its options were still being parsed). '--' ends the options, as for click."""
    for i, token in enumerate(argv):
        if token == "--":
            return None
        if token == JSON_FLAG:
            return argv[i + 1] if i + 1 < len(argv) else None
        if token.startswith(JSON_FLAG + "="):
            return token.split("=", 1)[1]
    return None


def write_error_document(argv: list[str], message: str) -> None:
    """CLI.md: every command given `--json PATH` that exits 2 writes {"ok": false, "error": ...} there (or to
    stdout for '-'); a PATH that cannot be written is left alone (the error was already printed)."""
    from pdctl.cli.render import write_json
    from pdctl.errors import UserError

    path = json_target(argv)
    if not path:
        return
    try:
        write_json(path, {"ok": False, "error": message})
    except UserError:
        pass


class FiniteFloatRange(click.FloatRange):
    """click's FloatRange, refusing nan and inf (which pass every bound of FloatRange): a bad option value
    is exit 2 with a message, never a crash later when the number is used (a sleep, an int())."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        import math

        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number
