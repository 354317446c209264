"""check-compat and plan wall time, cold, as a user runs them: `pdctl check-compat` / `pdctl plan` processes.

Target (issue 11): under 0.5 s each on an idle machine, with no torch/numpy import. Measured side by side in
one run with the interpreter's own start-up (`python -c pass`) and `pdctl --help`, so a loaded machine shows
as ratios rather than as a failed number. `python -m benchmarks.bench_compat` or `make bench`.
"""

from __future__ import annotations

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


def wall(args: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, check=False, timeout=120)
    return time.perf_counter() - start


def main() -> int:
    """Print the median of RUNS cold runs per case, and each as a ratio of the bare interpreter start."""
    for args in CASES.values():  # warm the page cache once
        wall(args)
    medians = {name: statistics.median(wall(args) for _ in range(RUNS)) for name, args in CASES.items()}
    base = medians["python -c pass"]
    print(f"{'case':40s} {'median s':>9s} {'x python':>9s}")
    for name, value in medians.items():
        print(f"{name:40s} {value:9.3f} {value / base:9.1f}")
    worst = max(v for k, v in medians.items() if k.startswith(("check-compat", "plan")))
    verdict = "within" if worst < TARGET_S else "OVER"
    print(f"slowest check-compat/plan: {worst:.3f} s ({verdict} the {TARGET_S} s target on this machine now)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
