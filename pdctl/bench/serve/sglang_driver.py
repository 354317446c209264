"""Runs SGLang's own serving benchmark (`sglang.benchmark.serving`, a.k.a. `python -m sglang.bench_serving`)
once per sweep point, inside the interpreter that has SGLang installed.

Why a driver script: the load generator lives in SGLang's environment (CUDA/torch pins pdctl must not share),
so pdctl runs this file with that interpreter. It imports only the standard library and SGLang, calls the
tool's own command line entry (`cli_main`, with the arguments pdctl built) once per point in ONE process
(the tool's imports cost seconds; paying them once per deployment keeps a sweep's overhead small), and after
each point prints one line `PDCTL-POINT {"index": i, "ok": bool, "error": str|null}` that pdctl reads for
progress. The tool appends its result document (with per-request details) to the output file of each point.

    python sglang_driver.py PLAN.json      # PLAN: {"points": [{"index": i, "argv": [...]}, ...]}
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import traceback
import warnings

# This file's own folder is on sys.path when it runs as a script, and holds pdctl's datasets.py, which would
# shadow Hugging Face's `datasets` that the tool imports.
_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _HERE]


def main(plan_path: str) -> int:
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "mean of empty slice" when every request failed
    from sglang.benchmark.serving import cli_main

    for point in plan["points"]:
        sys.argv = ["sglang.benchmark.serving", *point["argv"]]
        error = None
        try:
            with contextlib.redirect_stdout(sys.stderr):  # the tool's own report goes to the log
                cli_main()
        except SystemExit as exc:
            if exc.code not in (0, None):
                error = f"the tool exited with {exc.code}"
        except Exception as exc:  # noqa: BLE001 - one point's failure (e.g. every request failed) is data
            traceback.print_exc(file=sys.stderr)
            error = f"{type(exc).__name__}: {exc}"
        line = {"index": point["index"], "ok": error is None, "error": error}
        print("PDCTL-POINT " + json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
