"""How pdctl processes end (pdctl/procexit.py): the exit code is never lost, and importing pdctl or creating
a real transfer backend never changes the exit code of someone else's process (pytest's above all)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.paths import REPO

BACKENDS_THEN_FAIL = '''
import numpy as np

from pdctl.transfer.backends import create_backend

BUF = np.zeros(1 << 16, dtype=np.uint8)


def test_creates_real_nixl_and_mooncake_backends():
    for kind in ("nixl", "mooncake"):
        backend = create_backend(kind, f"pytest-{kind}")
        backend.register([(int(BUF.ctypes.data), BUF.nbytes)])  # left open on purpose: exit must cope


def test_then_fails():
    assert 1 == 2
'''


def _python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, check=False)


@pytest.mark.e2e
@pytest.mark.parametrize("failing", [True, False], ids=["with-a-failure", "all-passing"])
def test_pytest_exit_code_survives_real_transfer_backends(tmp_path: Path, failing: bool) -> None:
    """The regression of issue 10: a session that created NIXL and Mooncake backends and then failed
    exited 0. The failing run must exit 1, the passing one 0."""
    body = BACKENDS_THEN_FAIL if failing else BACKENDS_THEN_FAIL.split("\n\ndef test_then_fails")[0] + "\n"
    (tmp_path / "test_backends_then_fail.py").write_text(body)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: not this repo's conftest or options
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_backends_then_fail.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    if failing:
        assert "1 failed, 1 passed" in summary, done.stdout[-3000:] + done.stderr[-2000:]
        assert done.returncode == 1, (done.returncode, summary)
    else:
        assert "1 passed" in summary and "failed" not in summary, done.stdout[-3000:]
        assert done.returncode == 0, (done.returncode, summary)


@pytest.mark.parametrize(
    ("body", "code", "stderr_has"),
    [
        ("return None", 0, ""),
        ("return 3", 3, ""),
        ("raise SystemExit(4)", 4, ""),
        ("raise SystemExit('a message')", 1, "a message"),
        ("raise ValueError('boom')", 1, "ValueError: boom"),
        ("raise KeyboardInterrupt", 130, ""),
        ("import sys; sys.exit(2)", 2, ""),
    ],
)
@pytest.mark.parametrize("native", [False, True], ids=["plain", "nixl-loaded"])
def test_run_and_exit_keeps_every_exit_code(body: str, code: int, stderr_has: str, native: bool) -> None:
    load = "import nixl_cu12  # a native transfer library: the os._exit path" if native else ""
    done = _python(f"""
        {load}
        import atexit
        from pdctl.procexit import run_and_exit
        atexit.register(lambda: print("atexit ran", flush=True))

        def main():
            {body}

        run_and_exit(main)
    """)
    assert done.returncode == code, done.stderr[-2000:]
    assert stderr_has in done.stderr
    assert "atexit ran" in done.stdout  # cleanups registered by the program still run on both paths


@pytest.mark.e2e
@pytest.mark.parametrize("ending", ["import sys; sys.exit(5)", "raise SystemExit(5)"])
def test_importing_pdctl_and_creating_a_backend_leaves_the_exit_code_alone(ending: str) -> None:
    done = _python(f"""
        import numpy as np
        from pdctl.transfer.backends import create_backend
        buf = np.zeros(4096, dtype=np.uint8)
        backend = create_backend("nixl", "plain-script")
        backend.register([(int(buf.ctypes.data), buf.nbytes)])
        {ending}
    """)
    assert done.returncode == 5, done.stderr[-2000:]
