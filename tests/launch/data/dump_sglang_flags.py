"""Regenerate sglang_0_5_23_flags.{json,txt} from SGLang's own parser (ServerArgs.add_cli_args).

Run with an interpreter that can import sglang 0.5.23 (no GPU needed: `pip install sglang==0.5.23 --no-deps`
plus psutil, pybase64, msgspec, pyzmq, ipython, triton into a venv that also sees torch), e.g.
    PYTHONPATH=/tmp/sgl/src VENV/bin/python tests/launch/data/dump_sglang_flags.py
Writes: every `--flag` with its argparse action, nargs and choices (JSON), and the names alone (txt).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def dump() -> dict[str, dict]:
    from sglang.srt.server_args import ServerArgs

    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    out: dict[str, dict] = {}
    for action in parser._actions:
        for flag in action.option_strings:
            if flag.startswith("--"):
                nargs = (
                    action.nargs if isinstance(action.nargs, (int, str, type(None))) else str(action.nargs)
                )
                choices = sorted(map(str, action.choices)) if action.choices is not None else None
                out[flag] = {"action": type(action).__name__, "nargs": nargs, "choices": choices}
    return out


if __name__ == "__main__":
    here = Path(__file__).parent
    flags = dump()
    (here / "sglang_0_5_23_flags.json").write_text(json.dumps(flags, indent=0, sort_keys=True))
    (here / "sglang_0_5_23_flags.txt").write_text("\n".join(sorted(flags)) + "\n")
    print(f"{len(flags)} flags")
