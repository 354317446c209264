"""`pdctl parity` bad input: clear message and exit 2, never a traceback (no servers needed)."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.support.net import free_port


def _pdctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pdctl", "parity", *args], check=False, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--candidate", "http://127.0.0.1:{port}", "--reference", "http://127.0.0.1:{port}"], "candidate .* is unreachable"),
        (["--candidate", "http://127.0.0.1:{port}"], "exactly one of --reference URL and --reference-topology"),
        (["--candidate", "x", "--run-dir", "d", "--reference", "y"], "either --candidate URL or --run-dir"),
        (["--candidate", "http://a", "--reference", "http://b", "--tolerance", "-1"], "--tolerance"),
        (["--candidate", "ftp://a", "--reference", "http://b"], "not an http"),
        (["--candidate", "http://a", "--reference", "http://b", "--page-size", "0"], "--page-size must be"),
        (["--run-dir", "{tmp}/nope", "--reference", "http://b"], "not a pdctl run directory"),
        (["--candidate", "http://a", "--reference", "http://b", "--soak", "0"], "--soak"),
        (["--candidate", "http://a", "--reference", "http://b", "--soak", "5d"], "--soak"),
        (["--candidate", "http://a", "--reference", "http://b", "--floor-factor", "0.5"], "--floor-factor"),
        (["--candidate", "http://a", "--reference", "http://b", "--numerics", "fast"], "--numerics"),
        (["--candidate", "http://a", "--reference", "http://b", "--tp-control", "http://c", "--no-tp-control"],
         "--tp-control URL or --no-tp-control"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, args: list[str], message: str) -> None:
    port = free_port()  # nothing listens there
    proc = _pdctl(*[a.format(port=port, tmp=tmp_path) for a in args])
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert re.search(message, " ".join(proc.stderr.split())), proc.stderr  # rich wraps long lines
