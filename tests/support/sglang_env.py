"""The SGLang side environment (`make sglang-env`): an interpreter that imports SGLang's own code on CPU, for
tests that use SGLang as an oracle (its argument parser, its disaggregation code).

PDCTL_SGLANG_PYTHON names it (the Makefile exports it); without the variable the checkout's .venv-sglang is
used. Missing: the `sglang_python` fixture skips, saying how to build it (in CI a skip fails the run)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO

ENV_VAR = "PDCTL_SGLANG_PYTHON"
# Older releases run in the same side venv with their own wheel (and its pure-Python pins) first on PYTHONPATH:
# the overlays scripts/sglang-flags/generate.py builds (`make sglang-overlays`), here or under $OVERLAYS_VAR.
OVERLAYS_VAR = "PDCTL_SGLANG_OVERLAYS"
# The releases whose own parser the differential suite holds pdctl's tables against, besides the side venv's
# 0.5.23 (the Makefile's SGLANG_ORACLE_RELEASES builds their overlays; a test checks the two lists agree): the
# oldest table, the post-releases srt-slurm recipes run, and one from the middle.
ORACLE_RELEASES = ("0.5.0rc2", "0.5.5.post2", "0.5.8", "0.5.8.post1", "0.5.12")
# The releases whose start-up argument resolution tests/sglang/test_resolution.py runs (their overlays: the
# Makefile's SGLANG_RESOLUTION_RELEASES): the newest first (0.5.16-0.5.18 predate override_platform: the oracle
# stands in at the device probes themselves, tests/support/sglang_resolution_oracle.py::_LegacyDevice).
RESOLUTION_RELEASES = ("0.5.23", "0.5.22", "0.5.21", "0.5.20", "0.5.19", "0.5.18", "0.5.17", "0.5.16")


def sglang_python() -> str | None:
    """The side environment's interpreter, or None when it is not built."""
    path = os.environ.get(ENV_VAR) or str(REPO / ".venv-sglang" / "bin" / "python")
    return path if Path(path).exists() else None


def overlay(version: str) -> Path | None:
    """The overlay directory of SGLang VERSION (its wheel + pins), or None when it was not built."""
    root = Path(os.environ.get(OVERLAYS_VAR) or REPO / ".pdctl" / "sglang-flags")
    path = root / version
    return path if (path / ".pdctl-complete").exists() else None  # generate.py: the parser imported from it


class Oracle:
    """One long-lived SGLang worker (tests/support/sglang_oracle.py in the side venv) fed batches as JSON.

    Starting SGLang's imports takes seconds; one worker for the whole suite makes a sweep of ten thousand
    configurations cost a few seconds of SGLang time. Always `close()` it (the fixture does)."""

    BATCH = 2000

    def __init__(self, python: str, *, overlay: Path | None = None, script: str = "sglang_oracle.py") -> None:
        """SCRIPT (a worker in tests/support) run by PYTHON; OVERLAY first on its path (an older release)."""
        import subprocess

        env = {**os.environ, "PYTHONPATH": str(overlay)} if overlay else None
        self.proc = subprocess.Popen([python, "-W", "ignore", str(REPO / "tests" / "support" / script)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     text=True, cwd=REPO, start_new_session=True, env=env)
        hello = self._line()
        self.version = hello["ready"]
        self.calls: dict[str, int] = {}

    def _line(self) -> dict:
        import json

        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"SGLang oracle exited (code {self.proc.poll()})")
        return json.loads(line)

    def ask(self, op: str, cases: list) -> list:
        """SGLang's answers for CASES (in order); raises with SGLang's traceback if the worker failed."""
        import json

        assert self.proc.stdin is not None
        out: list = []
        for start in range(0, len(cases), self.BATCH):
            batch = cases[start:start + self.BATCH]
            self.proc.stdin.write(json.dumps({"op": op, "cases": batch}) + "\n")
            self.proc.stdin.flush()
            reply = self._line()
            if "error" in reply:
                raise RuntimeError(f"SGLang oracle failed on {op}:\n{reply['error']}")
            out += reply["results"]
        self.calls[op] = self.calls.get(op, 0) + len(cases)
        return out

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001 - a stuck worker is killed, whatever the reason
            self.proc.kill()
            self.proc.wait(timeout=30)


@pytest.fixture(scope="module")
def oracle(sglang_python: str) -> Iterator[Oracle]:
    """SGLang's own code in the side venv, one worker per test module, always closed (a package's conftest
    imports this fixture to offer it)."""
    worker = Oracle(sglang_python)
    try:
        yield worker
    finally:
        worker.close()


def release_worker(version: str, python: str, script: str) -> Iterator[tuple[str, Oracle]]:
    """(VERSION, SCRIPT's worker in that release): 0.5.23 is the side venv's own, older ones their overlay (a
    missing overlay skips, saying how to build it). The generator behind the per-release module fixtures."""
    where = None
    if version != "0.5.23":
        where = overlay(version)
        if where is None:
            pytest.skip(f"no overlay of SGLang {version}: run `make sglang-overlays` "
                        f"(scripts/sglang-flags/generate.py --overlays-only {version})")
    worker = Oracle(python, overlay=where, script=script)
    try:
        assert worker.version == version, f"the overlay of {version} imports SGLang {worker.version}"
        yield version, worker
    finally:
        worker.close()

