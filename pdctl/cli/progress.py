"""Live progress of the long commands (parity, bench serve): one rich bar per phase with done/total, a stats
text and the elapsed time; on a console that is not a terminal (CI logs, pipes) rich cannot redraw, so a plain
line is printed per update instead."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


class PhaseProgress:
    """Bars keyed by phase name; `progress` is the rich Progress to enter (`with p.progress:`)."""

    def __init__(self, out: Any, label: str, width: int = 20) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.out, self.label = out, label
        self.live = out.is_terminal
        self.progress = Progress(TextColumn(f"{{task.description:<{width}}}"), BarColumn(), MofNCompleteColumn(),
                                 TextColumn("{task.fields[stats]}"), TimeElapsedColumn(), console=out,
                                 transient=False, disable=not self.live)
        self.tasks: dict[str, Any] = {}

    def note(self, text: str) -> None:
        """A line of its own (e.g. what is being set up before the first update)."""
        self.out.print(f"{self.label}: {text}", highlight=False, markup=False)

    def show(self, phase: str, done: int, total: int, stats: str) -> None:
        """PHASE is at DONE of TOTAL; STATS says how it goes."""
        if not self.live:
            self.out.print(f"{self.label} {phase}: {done}/{total}  {stats}", highlight=False, markup=False)
            return
        task = self.tasks.get(phase)
        if task is None:
            task = self.tasks[phase] = self.progress.add_task(phase, total=total, stats="")
        self.progress.update(task, completed=done, total=total, stats=stats)


def run_live(
    make_progress: Callable[[Any], PhaseProgress],
    run: Callable[[PhaseProgress], Any],
    *,
    show: Callable[[Any, Any], None],
    json_path: str | None,
    report_path: str | None,
    write_report: Callable[[Any, str], Any],
) -> Any:
    """The one sequence of the long commands (parity, bench serve): RUN under live bars (on stderr when the
    JSON goes to stdout), the printed result, its HTML report when asked, then its JSON document; returns the
    result for the command's verdict."""
    from pdctl.cli.console import console, err_console, write_json

    out = err_console if json_path == "-" else console
    progress = make_progress(out)
    with progress.progress:
        result = run(progress)
    show(result, out)
    if report_path:
        out.print(f"report: {write_report(result, report_path)}", highlight=False)
    write_json(json_path, result.document())
    return result
