"""check-compat and plan wall time, cold, as a user runs them: `pdctl check-compat` / `pdctl plan` processes.

Target (issue 11): under 0.5 s each on an idle machine, with no torch/numpy import. Measured side by side in
one run with the interpreter's own start-up (`python -c pass`) and `pdctl --help`, so a loaded machine shows
as ratios rather than as a failed number; the CPU time of each process (user + sys, which a busy machine
inflates far less than wall time) estimates the wall time on an idle one. `python -m benchmarks.bench_compat`
or `make bench`.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 0.5
RUNS = 7
CASES = {
    "python -c pass": ["-c", "pass"],
    "pdctl --help": ["-m", "pdctl", "--help"],
    "check-compat gpt-oss-120b nixl": ["-m", "pdctl", "check-compat", "configs/gpt-oss-120b-p1-d4-gb300-nixl.yaml"],
    "check-compat llama p4-d2": ["-m", "pdctl", "check-compat", "configs/llama-3.1-8b-p4-d2-h100.yaml"],
    "check-compat rejected (args-override)": ["-m", "pdctl", "check-compat", "configs/invalid/args-override.yaml"],
    "plan gpt-oss-20b p2-d1": ["-m", "pdctl", "plan", "configs/gpt-oss-20b-p2-d1-h100-nixl.yaml"],
}


def run(args: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one cold `python ARGS` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, check=False, timeout=120)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    """Print the medians of RUNS cold runs per case (wall, CPU) and the wall time as a ratio of the bare
    interpreter start."""
    for args in CASES.values():  # warm the page cache once
        run(args)
    walls: dict[str, float] = {}
    cpus: dict[str, float] = {}
    for name, args in CASES.items():
        samples = [run(args) for _ in range(RUNS)]
        walls[name] = statistics.median(w for w, _ in samples)
        cpus[name] = statistics.median(c for _, c in samples)
    base = walls["python -c pass"]
    print(f"{'case':40s} {'wall s':>8s} {'cpu s':>8s} {'x python':>9s}")
    for name in CASES:
        print(f"{name:40s} {walls[name]:8.3f} {cpus[name]:8.3f} {walls[name] / base:9.1f}")
    judged = [k for k in CASES if k.startswith(("check-compat", "plan"))]
    worst_wall, worst_cpu = max(walls[k] for k in judged), max(cpus[k] for k in judged)
    print(f"slowest check-compat/plan: {worst_wall:.3f} s wall now, {worst_cpu:.3f} s CPU "
          f"({'within' if worst_cpu < TARGET_S else 'OVER'} the {TARGET_S} s target for an idle machine)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
