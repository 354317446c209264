"""Runs SGLang's own serving benchmark (`sglang.benchmark.serving`, a.k.a. `python -m sglang.bench_serving`)
once per sweep point, inside the interpreter that has SGLang installed.

Why a driver script: the load generator lives in SGLang's environment (CUDA/torch pins pdctl must not share),
so pdctl runs this file with that interpreter. It imports only the standard library and SGLang, calls the
tool's own command line entry (`cli_main`, with the arguments pdctl built) once per point in ONE process
(the tool's imports cost seconds; paying them once per deployment keeps a sweep's overhead small), and after
each point prints one line `PDCTL-POINT {"index": i, "ok": bool, "error": str|null}` that pdctl reads for
progress. The tool appends its result document (with per-request details) to the output file of each point.

What the tool's result cannot say, the driver measures by wrapping the tool's request function (its own
`ASYNC_REQUEST_FUNCS` table, read by the tool at each point): how many warm-up requests were sent before the
measured ones and what they asked the server to do (the server's counters include them), and the peak number
of measured requests in flight at once (the tool's own `max_concurrent_requests` counts requests per whole
second, so it overstates). Both go into the point's line as `client`.

Before each point it prints `PDCTL-READY {"index": i}` and waits for one line on stdin, so pdctl can read the
servers' counters before the point's first request (also the warm-up) is sent.

    python sglang_driver.py PLAN.json      # PLAN: {"points": [{"index": i, "argv": [...], "warmup": w}, ...]}
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


class Recorder:
    """Every request the tool sends during one point: the first WARMUP are its warm-up (the tool awaits them all
    before the measured run starts), the rest are measured."""

    def __init__(self, warmup: int) -> None:
        self.warmup = warmup
        self.calls = 0
        self.in_flight = 0
        self.peak = 0
        self.warm = {"sent": 0, "ok": 0, "prompt_tokens": 0, "output_tokens": 0}

    def wrap(self, func):
        async def recorded(request_func_input, *args, **kwargs):
            self.calls += 1
            warm = self.calls <= self.warmup
            if not warm:
                self.in_flight += 1
                self.peak = max(self.peak, self.in_flight)
            try:
                output = await func(request_func_input, *args, **kwargs)
            finally:
                if not warm:
                    self.in_flight -= 1
            if warm:
                self.warm["sent"] += 1
                if getattr(output, "success", False):
                    self.warm["ok"] += 1
                    self.warm["prompt_tokens"] += int(getattr(output, "prompt_len", 0) or 0)
                    self.warm["output_tokens"] += int(getattr(output, "output_len", 0) or 0)
            return output

        return recorded

    def document(self) -> dict:
        return {"warmup": dict(self.warm), "peak_in_flight": self.peak, "sent": max(0, self.calls - self.warmup)}


def main(plan_path: str) -> int:
    with open(plan_path, encoding="utf-8") as f:
        plan = json.load(f)
    warnings.simplefilter("ignore", FutureWarning)
    warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "mean of empty slice" when every request failed
    from sglang.benchmark import serving
    from sglang.benchmark.serving import cli_main

    originals = dict(serving.ASYNC_REQUEST_FUNCS)
    for point in plan["points"]:
        print("PDCTL-READY " + json.dumps({"index": point["index"]}), flush=True)
        if not sys.stdin.readline():  # pdctl went away
            return 1
        recorder = Recorder(int(point.get("warmup", 0)))
        serving.ASYNC_REQUEST_FUNCS.update({k: recorder.wrap(f) for k, f in originals.items()})
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
        line = {"index": point["index"], "ok": error is None, "error": error, "client": recorder.document()}
        print("PDCTL-POINT " + json.dumps(line), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
