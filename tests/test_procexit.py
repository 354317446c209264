"""How pdctl processes end (pdctl/procexit.py): the exit code is never lost, and importing pdctl or creating
a real transfer backend never changes the exit code of someone else's process (pytest's above all)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support.net import wait_for
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
    exited 0. The failing run must exit 1, the passing one 0 (pytest with pdctl's pytest11 plugin, which any
    pytest in an environment with pdctl installed loads: NIXL would otherwise crash the exit with -11)."""
    body = BACKENDS_THEN_FAIL if failing else BACKENDS_THEN_FAIL.split("\n\ndef test_then_fails")[0] + "\n"
    (tmp_path / "test_backends_then_fail.py").write_text(body)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # its own rootdir: not this repo's conftest or options
    done = subprocess.run(
        # -p no:kmock: the test extra's kmock registers a pytest11 plugin that needs pytest-asyncio (this repo's
        # pyproject.toml turns it off the same way)
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:kmock",
         "test_backends_then_fail.py"],
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


@pytest.mark.parametrize("ending", ["import sys; sys.exit(5)", "raise SystemExit(5)"])
def test_importing_pdctl_and_its_transfer_libraries_leaves_the_exit_code_alone(ending: str) -> None:
    """No hook is installed by importing pdctl, its backends or the native libraries themselves. (Creating a
    NIXL agent is another matter: NIXL 1.5.1 then crashes at interpreter exit, which is why entry points end
    through pdctl.procexit and pytest sessions through pdctl.pytest_plugin.)"""
    done = _python(f"""
        import pdctl.cli.main, pdctl.transfer.backends, pdctl.transfer.backends.nixl
        import pdctl.transfer.backends.mooncake, pdctl.reference.server
        import nixl_cu12, mooncake.engine
        {ending}
    """)
    assert done.returncode == 5, done.stderr[-2000:]


def test_a_helper_that_dies_with_its_parent_is_not_orphaned(tmp_path: Path) -> None:
    """A helper in its own session (as bench-transfer's decode side is) dies when its parent is SIGKILLed."""
    pid_file = tmp_path / "child.pid"
    parent = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import os, time; from pdctl.procexit import die_with_parent; "
                                  "die_with_parent(); open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
                                  "time.sleep(600)"], start_new_session=True)
        time.sleep(600)
    """)], cwd=REPO)
    try:
        wait_for(pid_file.exists, timeout=60, what="the helper to start")
        child = int(pid_file.read_text())
        parent.kill()
        parent.wait(timeout=30)
        wait_for(lambda: not _alive(child), timeout=60, what=f"helper {child} to die with its parent")
    finally:
        if parent.poll() is None:
            parent.kill()


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"
