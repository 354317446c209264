"""Keep the machine busy during a test: one busy-loop process pinned to each CPU core (as a loaded CI runner or
laptop is), in its own process group, always killed when the block ends."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from tests.support.servers import kill_group


@contextmanager
def busy_cores(cores: list[int] | None = None) -> Iterator[list[subprocess.Popen]]:
    """A `while True: pass` process pinned to each of CORES (default: every core this process may use)."""
    cores = sorted(os.sched_getaffinity(0)) if cores is None else cores
    procs: list[subprocess.Popen] = []
    try:
        for core in cores:
            code = f"import os\nos.sched_setaffinity(0, {{{core}}})\nwhile True:\n    pass\n"
            procs.append(subprocess.Popen([sys.executable, "-c", code], start_new_session=True,
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        yield procs
    finally:
        for proc in procs:
            kill_group(proc, timeout=10)
