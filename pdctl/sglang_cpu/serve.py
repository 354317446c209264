"""`python -m pdctl.sglang_cpu.serve <sglang.launch_server args>`: SGLang's real server on a CPU node.

Applies pdctl.sglang_cpu.adaptations (verified against the installed SGLang first), then runs exactly what
`python -m sglang.launch_server` runs: load_plugins, prepare_server_args, run_server, kill_process_tree.

The adaptations are applied at import time on purpose: SGLang starts its scheduler and detokenizer processes
with multiprocessing's spawn, which imports this module again in each child (as `__mp_main__`), so every
process of the server is adapted the same way; only the parent (`__main__`) starts the server.
"""

from __future__ import annotations

import json
import os
import sys

from pdctl.sglang_cpu import REFUSED_EXIT
from pdctl.sglang_cpu.adaptations import AdaptationMismatch, apply_all, view_of

_ARGV_VAR = "PDCTL_SGLANG_CPU_ARGV"  # the parent's argv, for the children (theirs is multiprocessing's)

if __name__ == "__main__":
    os.environ[_ARGV_VAR] = json.dumps(sys.argv[1:])
try:
    APPLIED = apply_all(view_of(json.loads(os.environ.get(_ARGV_VAR, "[]"))))
except AdaptationMismatch as exc:
    print(f"error: {exc}", file=sys.stderr, flush=True)
    os._exit(REFUSED_EXIT)


def main(argv: list[str]) -> None:
    from sglang.launch_server import run_server
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import prepare_server_args
    from sglang.srt.utils import kill_process_tree

    print("pdctl CPU adaptations applied: " + "; ".join(APPLIED), file=sys.stderr, flush=True)
    load_plugins()
    server_args = prepare_server_args(argv)
    try:
        run_server(server_args)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)


if __name__ == "__main__":
    main(sys.argv[1:])
