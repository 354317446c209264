"""`pdctl diagnose`: option parsing and printing only (the diagnosis: pdctl.diagnose)."""

from __future__ import annotations

import click

from pdctl.cli.console import console, err_console, write_json
from pdctl.cli.options import json_option, run_dir_option


@click.command("diagnose")
@run_dir_option
@json_option("the diagnosis")
def diagnose(run_dir: str | None, json_path: str | None) -> None:
    """From a run's logs to the cause and the fix: every process's first failure (its log read as `pdctl logs`
    reads it, its exit or stop), ordered in time across processes, root cause first; a failure that follows
    another says so. A failure no known signature matches is shown with the lines around its first error and
    "no known cause". Exit 0 when nothing failed, 1 when something did (docs/diagnose.md lists the
    signatures)."""
    from rich.table import Table
    from rich.text import Text

    from pdctl.diagnose.collect import diagnose_run
    from pdctl.diagnose.explain import NO_KNOWN_CAUSE

    found = diagnose_run(run_dir)
    out = err_console if json_path == "-" else console
    if not found.findings:
        out.print(f"no failure found in the logs of the {found.checked} processes")
    else:
        table = Table(show_edge=False, show_lines=True)
        for name, opts in (("#", {"no_wrap": True}), ("process", {"no_wrap": True}), ("time", {"no_wrap": True}),
                           ("failure", {"overflow": "fold"}), ("cause", {"ratio": 2}), ("fix", {"ratio": 2})):
            table.add_column(name, **opts)
        for n, f in enumerate(found.findings, 1):
            sig = f.signature
            what = Text(f.what + (f" ({sig.component})" if sig else ""), style="red" if f.is_failure else "yellow")
            cause = Text((sig.cause if sig else NO_KNOWN_CAUSE) + (f"\n{f.explanation}" if f.explanation else ""))
            table.add_row(str(n), f.process, f.time.strftime("%H:%M:%S") if f.time else "", what, cause,
                          Text(sig.fix if sig else ""))
        out.print(table)
        for f in found.findings:  # the evidence: the line matched, or an unknown failure's first error
            lines = [f.line] if f.signature and f.line else f.context
            out.print(Text(f"--- {f.process}: " + ("its line" if f.signature else "its first error (no known cause)")
                           + " ---"), soft_wrap=True)
            out.print(Text("\n".join(x for x in lines if x is not None)), soft_wrap=True)
    write_json(json_path, found.to_json())
    if found.failed:
        raise click.exceptions.Exit(1)
