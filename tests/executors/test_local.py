"""The local executor's guard against pid reuse: a record whose process group leader started at another time
(the pid now belongs to someone else) is never signalled."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pdctl.executors.local import LocalExecutor, proc_stat


def test_pid_reuse_guard_never_signals_another_process(tmp_path: Path) -> None:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        stat = proc_stat(child.pid)
        assert stat is not None
        stale = {
            "name": "old",
            "pid": child.pid,
            "pgid": child.pid,
            "start_time": stat[2] - 1,
            "log": str(tmp_path / "x.log"),
        }
        executor = LocalExecutor()
        assert not executor.group_alive(stale)
        assert executor.stop(stale, 1.0) == "not running"
        assert child.poll() is None  # untouched
        live = dict(stale, start_time=stat[2])
        assert executor.group_alive(live) and executor.exit_code(live) is None
        assert executor.stop(live, 5.0) == "stopped"
        assert child.wait(timeout=5) is not None
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
