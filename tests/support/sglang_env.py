"""The SGLang side environment (`make sglang-env`): an interpreter that imports SGLang's own code on CPU, for
tests that use SGLang as an oracle (its argument parser, its disaggregation code).

PDCTL_SGLANG_PYTHON names it (the Makefile exports it); without the variable the checkout's .venv-sglang is
used. Missing: the `sglang_python` fixture skips, saying how to build it (in CI a skip fails the run)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.paths import REPO

ENV_VAR = "PDCTL_SGLANG_PYTHON"


def sglang_python() -> str | None:
    """The side environment's interpreter, or None when it is not built."""
    path = os.environ.get(ENV_VAR) or str(REPO / ".venv-sglang" / "bin" / "python")
    return path if Path(path).exists() else None
