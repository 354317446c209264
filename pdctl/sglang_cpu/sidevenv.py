"""pdctl's end of SGLang's real server on CPU: is the side venv complete, and the tiny models it serves.

Runs in pdctl's interpreter (standard library only): SGLang's interpreter is asked by subprocess. A piece
missing from it is bad input naming `make sglang-env` (exit 2), never a traceback from a server start.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import lru_cache
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.sglang_cpu import CHECKED_RELEASE
from pdctl.sglang_stack.launcher import local_python, pythonpath

# import names `python -m sglang.launch_server` needs on a CPU node (scripts/sglang-env/server-requirements.txt
# and the side venv's own set): the first that is missing is named
SERVER_MODULES = ("sglang", "torch", "transformers", "tokenizers", "safetensors", "uvloop", "multipart",
                  "setproctitle", "einops", "partial_json_parser", "openai_harmony", "interegular", "distro",
                  "easydict", "watchfiles", "zstandard", "openai", "httpx", "httpcore", "jiter", "sniffio",
                  "jsonschema", "referencing", "rpds", "xgrammar", "soundfile", "cffi", "pycparser")
TRANSFER_MODULES = {"nixl": "nixl._api", "mooncake": "mooncake.engine"}
HINT = "build SGLang's side environment: `make sglang-env` (scripts/sglang-env/build.sh)"
_PROBE = ("import importlib.util as u, importlib.metadata as m, json, sys\n"
          "def has(n):\n"
          "    try:\n        return u.find_spec(n) is not None\n"
          "    except Exception:\n        return False\n"
          "mods = sys.argv[1:]\n"
          "print(json.dumps({'missing': [n for n in mods if not has(n)],"
          " 'sglang': m.version('sglang') if has('sglang') else None}))")


@lru_cache(maxsize=8)
def _probe(python: str, modules: tuple[str, ...]) -> dict[str, Any]:
    if not Path(python).exists():
        return {"missing": ["the interpreter itself"], "sglang": None}
    try:
        out = subprocess.run([python, "-c", _PROBE, *modules], capture_output=True, text=True, timeout=120,
                             check=False)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        return {"missing": [f"(probe failed: {type(exc).__name__})"], "sglang": None}


def require_server_env(python: str, backend: str | None = None, what: str = "SGLang's server on a CPU node") -> str:
    """PYTHON's SGLang release when it has everything a CPU node's real server imports (and BACKEND's
    transfer library); else UserError naming what is missing and `make sglang-env`."""
    modules = SERVER_MODULES + ((TRANSFER_MODULES[backend],) if backend in TRANSFER_MODULES else ())
    got = _probe(python, modules)
    if not Path(python).exists():
        raise UserError(f"{what}: its interpreter {python} does not exist: {HINT}")
    if got["missing"]:
        raise UserError(f"{what} needs {', '.join(got['missing'])} in {python}: {HINT}")
    return str(got["sglang"])


def server_python() -> str:
    """SGLang's interpreter on this machine: $PDCTL_SGLANG_PYTHON, else ./.venv-sglang or the checkout's."""
    return local_python()


def init_model(directory: str, shape: str, seed: int) -> dict[str, Any]:
    """Write the tiny SHAPE model (pdctl.sglang_cpu.tinymodel) to DIRECTORY with SGLang's interpreter."""
    python = server_python()
    require_server_env(python, what="making a tiny model for SGLang")
    env = {**os.environ, "PYTHONPATH": pythonpath(os.environ.get("PYTHONPATH"))}
    try:
        out = subprocess.run([python, "-m", "pdctl.sglang_cpu.tinymodel", directory, shape, str(seed)],
                             capture_output=True, text=True, timeout=600, env=env, check=False)
    except subprocess.TimeoutExpired as exc:
        raise UserError(f"making the tiny {shape} model in {directory} took over 600 s") from exc
    if out.returncode != 0:
        tail = "\n".join(out.stderr.strip().splitlines()[-15:])
        raise UserError(f"making the tiny {shape} model in {directory} failed (exit {out.returncode})", detail=tail)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "checked_release": CHECKED_RELEASE}
