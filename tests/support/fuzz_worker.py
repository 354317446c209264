"""`python -m tests.support.fuzz_worker`: runs pdctl commands in-process for the CLI fuzz test (tests/cli).

Why a worker process: commands run in-process are fast (no interpreter start per example), but some load
native transfer libraries whose destructors crash at interpreter exit (NIXL 1.5.1); in this worker that
happens away from pytest, and the worker ends through pdctl.procexit like `pdctl` itself.

Protocol: one JSON request per stdin line {"argv": [...], "cwd": str}; for each, one stdout line
`@@FUZZ@@{"code": int, "out": str, "err": str}`. Other stdout lines (children of launched commands) are noise.
SIGINT is Ctrl-C for the command running (commands that run until Ctrl-C, such as `status --watch`).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

MARK = "@@FUZZ@@"


def main() -> int:
    from pdctl.cli.main import run
    from pdctl.procexit import call_main

    reply = sys.stdout
    while True:
        try:
            line = sys.stdin.readline()
        except KeyboardInterrupt:  # a Ctrl-C meant for a command that had just ended: nothing to interrupt
            continue
        if not line:
            return 0
        request = json.loads(line)
        out, err = io.StringIO(), io.StringIO()
        os.chdir(request["cwd"])
        argv = request["argv"]
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = call_main(lambda argv=argv: run(argv))  # exactly how `pdctl` gets its exit code
        reply.write(MARK + json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue()}) + "\n")
        reply.flush()


if __name__ == "__main__":
    from pdctl.procexit import run_and_exit

    run_and_exit(main)
