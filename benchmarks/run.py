"""`make bench`: run every benchmarks/bench_*.py in turn; each prints ratios measured side by side in one run.

Benchmarks, not timed tests, hold pdctl's performance targets. Run one with `python -m benchmarks.bench_X`.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import benchmarks


def main() -> int:
    """Import and run each benchmark module's `main()`; a failing one is reported, the rest still run."""
    names = sorted(m.name for m in pkgutil.iter_modules(benchmarks.__path__) if m.name.startswith("bench_"))
    only = sys.argv[1:]
    failed = []
    for name in names:
        if only and name not in only and name.removeprefix("bench_") not in only:
            continue
        print(f"\n===== {name} =====", flush=True)
        start = time.monotonic()
        try:
            rc = importlib.import_module(f"benchmarks.{name}").main()
        except Exception as exc:  # noqa: BLE001 - a benchmark's crash must not hide the others' numbers
            print(f"{name} FAILED: {exc!r}", flush=True)
            rc = 1
        print(f"({name}: {time.monotonic() - start:.1f} s)", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
