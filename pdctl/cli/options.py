"""Click options shared by several commands, so one option reads and behaves the same everywhere."""

from __future__ import annotations

import click

run_dir_option = click.option(
    "--run-dir", type=click.Path(file_okay=False), default=None, help="Run directory (default: latest)."
)
"""`--run-dir` of the commands that act on an existing run (status, logs, down): default is the latest run."""
