"""How a command line test says "this was bad input": exit 2, no traceback, and a message matching a pattern
(whitespace-normalised, since rich wraps long lines)."""

from __future__ import annotations

import re
import subprocess


def assert_bad_input(proc: subprocess.CompletedProcess, message: str) -> None:
    """PROC ended with exit 2, printed no traceback, and its stderr matches the regex MESSAGE."""
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(message, " ".join(proc.stderr.split())), proc.stderr
