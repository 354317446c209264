"""scripts/check-junit.py, .ci/run's second opinion on pytest's JUnit report: counts and where the time went."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

SCRIPT = REPO / "scripts" / "check-junit.py"


def _report(tmp_path: Path, body: str) -> Path:
    """A real pytest run's JUnit report over a test package written from BODY."""
    pkg = tmp_path / "tests" / "inner"
    pkg.mkdir(parents=True)
    (tmp_path / "tests" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "test_sample.py").write_text(body)
    report = tmp_path / "junit.xml"
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}  # a bare pytest, none of this venv's plugins
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    "--rootdir", str(tmp_path), "-c", "/dev/null", "tests"],
                   cwd=tmp_path, capture_output=True, text=True, timeout=120, check=False, env=env)
    return report


def _check(report: Path, *flags: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), str(report), *flags], capture_output=True, text=True,
                          timeout=60, check=False)


def test_a_clean_report_passes_and_says_where_the_time_went(tmp_path: Path) -> None:
    report = _report(tmp_path, "def test_a():\n    pass\n\n\nclass TestB:\n    def test_b(self):\n        pass\n")
    done = _check(report, "--no-skips", "--times")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 tests, 0 failed, 0 errors, 0 skipped" in done.stdout
    assert "per directory:" in done.stdout and " tests/inner\n" in done.stdout  # the class folded into its module
    assert "tests/inner/test_sample.py" in done.stdout.split("slowest modules:")[1]


def test_a_failure_or_a_skip_fails_the_check(tmp_path: Path) -> None:
    report = _report(tmp_path, "import pytest\n\n\ndef test_a():\n    pytest.skip('no')\n")
    assert _check(report).returncode == 0
    assert _check(report, "--no-skips").returncode == 1
    failing = _report(tmp_path / "f", "def test_a():\n    assert False\n")
    done = _check(failing)
    assert done.returncode == 1 and "1 failed" in done.stdout
