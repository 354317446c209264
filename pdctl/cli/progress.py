"""Live progress of the long commands (parity, bench serve): one rich bar per phase with done/total, a stats
text and the elapsed time; on a console that is not a terminal (CI logs, pipes) rich cannot redraw, so a plain
line is printed per update instead. `StatusLines` is the same for a command whose work reports one line at a
time (preflight): a live status line on a terminal, the lines themselves on stderr otherwise."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any


class StatusLines:
    """`with StatusLines(label) as say: say(line)`: on a terminal a rich status line showing the latest line;
    when stderr is not a terminal (CI, Slurm, a pipe) every line printed on stderr, so a batch log shows
    what ran and how long it took."""

    def __init__(self, label: str) -> None:
        from pdctl.cli.console import err_console

        self.out, self.label = err_console, label
        self.status = err_console.status(label) if err_console.is_terminal else None

    def __enter__(self) -> Callable[[str], None]:
        if self.status is not None:
            self.status.__enter__()
        return self.say

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self.status is not None:
            self.status.__exit__(kind, exc, tb)

    def say(self, line: str) -> None:
        if self.status is not None:
            self.status.update(f"{self.label}: {line}")
        else:
            self.out.print(f"{self.label}: {line}", highlight=False, markup=False, soft_wrap=True)


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
