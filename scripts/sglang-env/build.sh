#!/usr/bin/env bash
# Builds pdctl's SGLang side environment: a venv in which SGLang's own Python code imports on CPU, so that tests
# can call it as an oracle (its argument parser, its disaggregation conn modules) without CUDA, and so that
# SGLang's own PD transfer stack runs on CPU (pdctl.sglang_stack: NIXL, Mooncake; and the reference
# engine with `transfer.stack: sglang`, which needs fastapi/uvicorn; pdctl itself comes via PYTHONPATH).
#   scripts/sglang-env/build.sh VENV [SGLANG_VERSION]
# torch comes first and pinned to the CPU build (a bare requirement pulls a CUDA build); sglang and
# compressed-tensors come without their dependency pins (they would pull CUDA wheels); the pure-Python
# packages SGLang imports are pinned in requirements.txt beside this script; torchvision is replaced by an
# inert stub (stubs/torchvision: its C ops cannot load against CPU torch; SGLang imports it only in multimodal
# helpers the tests never call). server-requirements.txt: what SGLang's real server (launch_server) imports
# on CPU nodes (pdctl.sglang_cpu), --no-deps. Installs go through scripts/pip-install.sh (uv when $PDCTL_UV
# names it, as the Makefile does; pip otherwise).
set -euo pipefail
venv=${1:?usage: build.sh VENV [SGLANG_VERSION]}
version=${2:-0.5.23}
here=$(cd "$(dirname "$0")" && pwd)
export PIP_DISABLE_PIP_VERSION_CHECK=1
python3 -m venv "$venv"
pip() { bash "$here/../pip-install.sh" "$venv/bin/python" "$@"; }
pip -q torch==2.13.0 || pip -q torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
pip -q -r "$here/requirements.txt"
pip -q --no-deps "sglang==$version" compressed-tensors==0.18.0 apache-tvm-ffi==0.1.11
# `nixl` is the import name SGLang uses; its wheel only re-exports nixl_cu12 (and would pull CUDA 13 wheels).
pip -q --no-deps nixl==1.5.1
# What SGLang's real server imports (pdctl.sglang_cpu: `launch_server` on CPU nodes), without their own pins.
pip -q --no-deps -r "$here/server-requirements.txt"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$site/torchvision"
cp -r "$here/stubs/torchvision" "$site/torchvision"
"$venv/bin/python" - "$version" <<'PY'
import sys
import sglang
assert sglang.__version__ == sys.argv[1], (sglang.__version__, sys.argv[1])
from sglang.srt.server_args import ServerArgs  # noqa: F401
import sglang.srt.disaggregation.common.conn  # noqa: F401
import sglang.srt.disaggregation.nixl.conn  # noqa: F401
import sglang.srt.disaggregation.mooncake.conn  # noqa: F401
import sglang.benchmark.serving  # noqa: F401  (pdctl bench serve runs it)
import nixl._api  # noqa: F401  (SGLang's NIXL manager: pdctl.sglang_stack)
import mooncake.engine  # noqa: F401  (SGLang's Mooncake manager; needs libibverbs1)
import fastapi, uvicorn  # noqa: F401,E401  (the reference engine on SGLang's stack)
import sglang.launch_server  # noqa: F401  (SGLang's real server on CPU nodes: pdctl.sglang_cpu)
import sglang.srt.entrypoints.http_server  # noqa: F401
print(f"sglang {sglang.__version__} imports on CPU")
PY
