"""pdctl's exit policy for pytest sessions (a pytest11 entry point, loaded by pytest wherever pdctl is
installed): a test session that created a NIXL agent must still end with pytest's own exit code.

Why: NIXL 1.5.1's native destructors crash (SIGSEGV) at interpreter exit once an agent was created, whether
or not it was closed, on hosts with RDMA verbs providers installed (pdctl/procexit.py) — a passing run would
exit -11 and a failing one would not exit 1. pytest is the entry
point of such a process, so its exit is decided here, last: after every other unconfigure hook (the terminal
summary and the JUnit report are written by then), with a native transfer library loaded, the process ends
through pdctl.procexit with the session's exit status. Without one loaded nothing changes.
"""

from __future__ import annotations

from typing import Any

import pytest

from pdctl.procexit import exit_process, native_transfer_loaded

_session: Any = None


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    global _session
    _session = session


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if _session is None or not native_transfer_loaded():
        return
    exit_process(int(_session.exitstatus))
