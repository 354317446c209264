"""Click options shared by several commands, so one option reads and behaves the same everywhere."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

run_dir_option = click.option(
    "--run-dir", type=click.Path(file_okay=False), default=None, help="Run directory (default: latest)."
)
"""`--run-dir` of the commands that act on an existing run (status, logs, down): default is the latest run."""


def cannot_write(path: str) -> str | None:
    """Why PATH cannot be written as an output file (None if it can): tried for real, by opening it for
    appending (nothing is truncated; a file that did not exist is removed again)."""
    target = Path(path)
    if target.is_dir():
        return f"{path} is a directory"
    existed = target.exists()
    try:
        with open(target, "a", encoding="utf-8"):
            pass
    except OSError as exc:
        return f"cannot write {path}: {exc.strerror or exc}"
    if not existed:
        target.unlink(missing_ok=True)
    return None


def writable(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """click callback of output-file options: check the file can be written BEFORE the command does its
    work (a verdict computed for minutes must not be lost to a typo in --json/--report)."""
    if value is None or value == "-":
        return value
    problem = cannot_write(value)
    if problem:
        raise click.BadParameter(problem)
    return value


def json_option(what: str) -> Callable[[Any], Any]:
    """`--json PATH` (into the `json_path` parameter) of a command that writes WHAT as a JSON document;
    '-' = stdout (human output then goes to stderr). PATH is checked writable while parsing, before the
    command does any work."""
    return click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False, allow_dash=True),
        metavar="PATH",
        default=None,
        callback=writable,
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


def write_error_document(argv: list[str], message: str, *, diagnosis: dict[str, Any] | None = None) -> None:
    """CLI.md: every command given `--json PATH` that exits 2 writes {"ok": false, "error": ...} there (or to
    stdout for '-'); a PATH that cannot be written is left alone (the error was already printed). A command
    that fails (exit 1) because a process of its run died or hung writes it too, with the run's "diagnosis"."""
    from pdctl.cli.console import write_json
    from pdctl.errors import UserError

    path = json_target(argv)
    if not path:
        return
    try:
        write_json(path, {"ok": False, "error": message, **({"diagnosis": diagnosis} if diagnosis else {})})
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


_set = click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Override a topology key (dotted: prefill.tp=2, server.args.max-running-requests=8, nodes[0].host=h); "
    "VALUE is YAML (4 = int, true = bool, '4' = text). Repeatable; checked like the file.",
)
_cluster = click.option(
    "--cluster", "cluster", metavar="FILE", default=None,
    help="Cluster profile (Slurm defaults, container and model aliases, env defaults); default $PDCTL_CLUSTER, "
    "else pdctl-cluster.yaml in the working directory or a parent; `none`: no profile.",
)


def set_option(func: Callable[..., Any]) -> Callable[..., Any]:
    """`--set KEY=VALUE` and `--cluster FILE` of every command that reads a TOPOLOGY argument
    (pdctl.topology.overrides, pdctl.topology.profile): the function gets `overrides` and `cluster`."""
    return _set(_cluster(func))


def read_topology(path: str, overrides: tuple[str, ...], cluster: str | None) -> Any:
    """The TOPOLOGY argument loaded with its --set overrides and the cluster profile --cluster names."""
    from pdctl.topology import load_topology
    from pdctl.topology.profile import open_profile

    return load_topology(path, overrides, profile=open_profile(cluster))


def deadline_option(what: str) -> Callable[[Any], Any]:
    """--deadline SECONDS: the whole command's limit (eval, parity, bench serve). When it passes the command
    stops, keeps what it has, names a dead or hung process of the run if there is one, and exits 1."""
    return click.option("--deadline", "deadline_s", type=FiniteFloatRange(min=0, min_open=True), default=None,
                        help=f"Seconds {what} may take in all; past it: stop, keep the results, name a dead or "
                             "hung process of the run, exit 1. [default: none]")
