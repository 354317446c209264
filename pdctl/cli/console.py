"""Shared printing helpers for the CLI: the console, errors, and writing `--json` documents."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console
from rich.markup import escape

from pdctl.errors import UserError

# Output that is not a terminal (CI logs, pipes, files) has no width of its own: rich then assumes 80 columns
# and squeezes the wide tables (status, bench serve) into a column a character wide. Such output gets WIDE
# columns unless COLUMNS says otherwise; a terminal keeps its own width.
WIDE = 160


def _console(*, stderr: bool) -> Console:
    found = Console(stderr=stderr)
    if found.is_terminal or os.environ.get("COLUMNS"):
        return found
    return Console(stderr=stderr, width=WIDE)


console = _console(stderr=False)
err_console = _console(stderr=True)


def print_error(message: str, detail: str | None = None) -> None:
    """Print an error (and e.g. a log tail) to stderr, the one way every command reports failure.

    The message is escaped (it may quote user input holding `[...]`); the detail is printed verbatim
    (markup off). Both are soft-wrapped, so messages, log lines and commands keep their own line breaks
    instead of being cut at the terminal width (80 columns when stderr is not a terminal): a suggested
    command (`pdctl down --run-dir ...`) stays on one line, copy-pasteable and greppable."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", highlight=False, markup=True, soft_wrap=True)
    if detail:
        err_console.print(detail, highlight=False, markup=False, soft_wrap=True)


def write_json(path: str | None, document: Any) -> None:
    """Write a command's JSON document to PATH, or to stdout when PATH is '-'; no-op when None."""
    if path is None:
        return
    text = json.dumps(document, indent=2, sort_keys=False, default=str)
    if path == "-":
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
        return
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text + "\n")
    except OSError as exc:  # a bad --json PATH is bad input (exit 2), not a traceback
        raise UserError(f"cannot write --json file {path}: {exc.strerror or exc}") from None
