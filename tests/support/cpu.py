"""CPU accounting of processes (from /proc): what an idle server costs, for tests and benchmarks/bench_idle.py."""

from __future__ import annotations

import os
import time
from pathlib import Path


def cpu_seconds(pid: int) -> float:
    """utime + stime of PID (all its threads), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def idle_share(pids: dict[str, int], seconds: float) -> dict[str, float]:
    """Share of one core each process (name -> pid) used over a window of SECONDS."""
    before = {name: cpu_seconds(pid) for name, pid in pids.items()}
    start = time.monotonic()
    time.sleep(seconds)  # the measurement window itself, not a synchronisation
    wall = time.monotonic() - start
    return {name: (cpu_seconds(pid) - before[name]) / wall for name, pid in pids.items()}
