"""`pdctl parity` shows live progress: phase, prompt i/n, passes and failures so far (a bar on a terminal,
a line per prompt elsewhere, e.g. in CI logs)."""

from __future__ import annotations

import io

from rich.console import Console

from pdctl.cli.parity import LiveProgress
from pdctl.parity.runner import VARIANTS_PHASE, ProgressUpdate


def _updates():
    yield ProgressUpdate("setup", 0, 0, detail="checking the candidate")
    yield ProgressUpdate("cold", 1, 3, 1, 0, "below_page:15")
    yield ProgressUpdate("cold", 2, 3, 1, 1, "one_page:16")
    yield ProgressUpdate(VARIANTS_PHASE, 3, 8, 0, 0, "above_page:17+prefix16", compares=False)
    yield ProgressUpdate("warm", 1, 3, 2, 0, "below_page:15")


def _render(terminal: bool) -> tuple[LiveProgress, str]:
    buf = io.StringIO()
    view = LiveProgress(Console(file=buf, force_terminal=terminal, width=200))
    with view.progress:
        for update in _updates():
            view(update)
    return view, buf.getvalue()


def test_plain_lines_when_not_a_terminal():
    _, out = _render(terminal=False)
    assert "parity: checking the candidate" in out
    assert "parity cold: 1/3  pass 1 fail 0  below_page:15" in out
    assert "parity cold: 2/3  pass 1 fail 1  one_page:16" in out
    assert "parity warm: 1/3  pass 2 fail 0" in out
    # a phase that only collects the reference's answers says so, without "pass 0 fail 0" (issue 20)
    assert "parity warm prep: reference answers to shared-prefix variants: 3/8  above_page:17+prefix16" in out
    assert "pass 0 fail 0" not in out


def test_a_bar_per_phase_on_a_terminal():
    view, out = _render(terminal=True)
    assert set(view.tasks) == {"cold", VARIANTS_PHASE, "warm"}
    cold = view.progress.tasks[view.tasks["cold"]]
    assert (cold.completed, cold.total) == (2, 3) and "pass 1 fail 1" in cold.fields["stats"]
    assert "pass 2 fail 0" in out
