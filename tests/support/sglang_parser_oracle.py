"""SGLang's own argument parser as a worker, for any release (the differential tests of pdctl's flag tables).

    PYTHONPATH=<overlay of release X> PDCTL_SGLANG_PYTHON tests/support/sglang_parser_oracle.py

Imports nothing but `sglang.srt.server_args` (which every 0.5 release has), so it also runs for releases
whose disaggregation code the full oracle (sglang_oracle.py, 0.5.23 only) could not import. Same protocol
as sglang_oracle.py: one JSON request per line, {"op": NAME, "cases": [...]}, one JSON reply per line.
Ops: `parse` (an argv -> SGLang's values or its error) and `dump` (the release's parser as
scripts/sglang-flags/dump.py writes it: what pdctl's table for the release must equal). Runs without pdctl.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys
import traceback
from pathlib import Path
from typing import Any

_PARSER: Any = None
DUMP = Path(__file__).resolve().parents[2] / "scripts" / "sglang-flags"


def op_parse(argv: list[str]) -> dict[str, Any]:
    """SGLang's own argument parser (ServerArgs.add_cli_args) on one command line: the values, or its error."""
    from sglang.srt.server_args import ServerArgs

    global _PARSER
    if _PARSER is None:
        _PARSER = argparse.ArgumentParser(exit_on_error=False)
        ServerArgs.add_cli_args(_PARSER)
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            ns = _PARSER.parse_args(argv)
    except (SystemExit, argparse.ArgumentError) as exc:
        return {"error": str(exc) if isinstance(exc, argparse.ArgumentError) else err.getvalue().strip()}
    return {"values": {k: (v if isinstance(v, (str, int, float, bool, type(None), list)) else repr(v))
                       for k, v in vars(ns).items()}}


def op_dump(_case: Any) -> dict[str, Any]:
    """The release's parser, dumped by the generator's own code (scripts/sglang-flags/dump.py)."""
    sys.path.insert(0, str(DUMP))
    try:
        import dump  # type: ignore[import-not-found]
    finally:
        sys.path.remove(str(DUMP))
    return dump.dump()


def serve(ops: dict[str, Any]) -> None:
    """Announce the release, then answer one request line at a time until stdin closes."""
    import sglang

    print(json.dumps({"ready": sglang.__version__}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            fn = ops[request["op"]]
            out = {"results": [fn(case) for case in request["cases"]]}
        except Exception:  # noqa: BLE001 - the suite shows SGLang's traceback
            out = {"error": traceback.format_exc()}
        print(json.dumps(out), flush=True)


OPS = {"parse": op_parse, "dump": op_dump}

if __name__ == "__main__":
    serve(OPS)
