"""SGLang's own start-up argument resolution, as an oracle: a worker run by the side venv's interpreter (0.5.23,
or an older release's overlay first on PYTHONPATH).

    PDCTL_SGLANG_PYTHON tests/support/sglang_resolution_oracle.py   (tests/sglang/test_resolution.py starts it)

One request per line: {"op": "resolve", "cases": [{"argv": [...], "gpu": {...}, "env": {SGLANG_*: ...}}]}. For each case it does what
`launch_server` does before it touches a device: `prepare_server_args(argv)` (the release's parser and
ServerArgs), `resolve_once()` (every resolution hook under sglang/srt/arg_groups/) and `check_server_args()`,
and answers {"verdict": "starts"} or {"verdict": "refuses", "error": "Type: message", "site": "file:line"}.

SGLang's code is not modified. The GPU is supplied, not probed, at the only places the resolution asks the
device (read off 0.5.23's arg_groups/):
- `runtime_context.override_platform(...)`: SGLang's own scoped override of the platform facts (is_cuda,
  is_sm90/is_sm100/is_blackwell..., device_capability); every hook reads the GPU through `get_platform()`;
- `torch.cuda.get_device_capability` (attention_hook, model_hook, overrides read it directly) -> the GPU's
  compute capability; `torch.cuda.is_available` / `device_count` -> True / the node's GPU count;
- `get_device_memory_capacity` as memory_hook and kv_shard_hook imported it -> the GPU's memory in MiB.
These return exactly what the probes return on that GPU (the values are nvidia-smi's, pdctl.sglang.memory).

Releases before 0.5.19 (0.5.16-0.5.18) have no `override_platform`: their resolution is `ServerArgs.__post_init__`
in server_args.py (plus a few arg_groups/ hooks) and it asks the device only through torch and
`sglang.srt.utils.common` (read off the three wheels: every probe there is `torch.cuda.is_available /
get_device_capability / get_device_name / device_count`, `torch.version.cuda`, or nvidia-smi's memory query).
`_LegacyDevice` stands in one level lower, at those sources: torch.cuda's four probes (the GPU's capability,
its nvidia-smi name, its count; the name tells GB200/GB300's MNNVL fabric), `torch.version.cuda` = "12.9" (the CUDA of SGLang's images for these
releases; every check reads it as ">= 12.3" or ">= 12.8", which 12.8-13.x all pass),
`utils.common.get_nvgpu_memory_capacity` (the nvidia-smi query) -> the GPU's memory, `is_flashinfer_available`
-> True (flashinfer ships with SGLang's CUDA wheels on every GPU node; 0.5.19+ get it as `has_flashinfer`), and
`sglang.srt.platforms`' resolved platform -> `CudaSRTPlatform()` (what `_resolve_platform` picks with CUDA
available and no plugin). SGLang's own `is_cuda`, `is_sm90_supported`, `is_sm100_supported`,
`is_blackwell_supported`, `get_device_sm`, `is_mnnvl_fabric_device`, `get_device_memory_capacity` then run
unmodified on those facts; their `lru_cache`s are cleared on entry and exit so no CPU answer memoized at
import (or another GPU's) leaks in or out.
This file must run without pdctl (it is not on the side venv's path).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import io
import os
import traceback
from collections.abc import Iterator
from typing import Any

import torch
from sglang.srt import server_args as sa_mod
from sglang_parser_oracle import serve  # the parser worker beside this file

try:  # 0.5.19+: SGLang's own platform override, and the facts this release knows
    from sglang.srt import runtime_context
    from sglang.srt.runtime_context import override_platform
    KNOWN = set(runtime_context._PLATFORM_PROBES) | set(runtime_context._PLATFORM_VALUES)
except (ImportError, AttributeError):  # 0.5.16-0.5.18: _LegacyDevice below
    override_platform = None

# The modules that imported get_device_memory_capacity (kv_shard_hook since 0.5.22; qwen3_vl's override).
MEMORY_MODULES = ("sglang.srt.arg_groups.memory_hook", "sglang.srt.arg_groups.kv_shard_hook",
                  "sglang.srt.arg_groups.model_overrides.qwen3_vl")


def _facts(gpu: dict[str, Any]) -> dict[str, Any]:
    major, minor = gpu["capability"]
    sm = major * 10 + minor
    facts = {"is_cuda": True, "is_hip": False, "is_npu": False, "is_xpu": False, "is_musa": False, "is_mps": False,
            "is_sm90": major == 9, "is_sm100": major == 10, "is_sm100_or_sm110": major in (10, 11),
            "is_sm110": major == 11, "is_sm120": major == 12, "is_blackwell": major >= 10,
            "is_hopper_with_cuda_12_3": major == 9, "has_flashinfer": True, "device_sm": sm,
            "device_capability": (major, minor)}
    return {k: v for k, v in facts.items() if k in KNOWN}


class _Device:
    """The GPU's facts at the device-probing functions, restored on exit."""

    def __init__(self, gpu: dict[str, Any]) -> None:
        self.gpu = gpu
        self.saved: list[tuple[Any, str, Any]] = []

    def _set(self, obj: Any, name: str, value: Any) -> None:
        self.saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    def __enter__(self) -> None:
        cap = tuple(self.gpu["capability"])
        self._set(torch.cuda, "get_device_capability", lambda *_a, **_k: cap)
        self._set(torch.cuda, "is_available", lambda: True)
        self._set(torch.cuda, "device_count", lambda: int(self.gpu["count"]))
        for name in MEMORY_MODULES:
            if importlib.util.find_spec(name) is None:  # not in this release
                continue
            module = importlib.import_module(name)
            if hasattr(module, "get_device_memory_capacity"):
                self._set(module, "get_device_memory_capacity", lambda *_a, **_k: float(self.gpu["memory_mib"]))
        self.scope = override_platform(**_facts(self.gpu))
        self.scope.install()

    def __exit__(self, *_exc: object) -> None:
        self.scope.restore()
        for obj, name, value in reversed(self.saved):
            setattr(obj, name, value)
        self.saved.clear()


CUDA_VERSION = "12.9"
# Imported before the stand-in, with this machine's facts: the resolution reads the model's config through
# ModelConfig, whose import pulls in the quantization kernels' modules, which import CUDA kernels (sgl_kernel) at
# import time when is_cuda(). Which kernels a module binds is not argument resolution; ModelConfig's fields are
# the config.json's either way.
PREIMPORTED = ("sglang.srt.configs.model_config",)


class _LegacyDevice(_Device):
    """0.5.16-0.5.18: the GPU's facts at torch's probes, nvidia-smi's memory query and the resolved platform."""

    def _clear_caches(self) -> None:
        from sglang.srt.utils import common

        for value in vars(common).values():
            if isinstance(value, functools._lru_cache_wrapper):  # the memoized probes (is_cuda, is_sm100_supported...)
                value.cache_clear()

    def __enter__(self) -> None:
        for name in PREIMPORTED:
            importlib.import_module(name)
        from sglang.srt import platforms
        from sglang.srt.platforms.cuda import CudaSRTPlatform
        from sglang.srt.utils import common

        cap = tuple(self.gpu["capability"])
        name = self.gpu["name"]  # nvidia-smi's; is_mnnvl_fabric_device reads GB200 / GB300 in it
        self._set(torch.cuda, "is_available", lambda: True)
        self._set(torch.cuda, "device_count", lambda: int(self.gpu["count"]))
        self._set(torch.cuda, "get_device_capability", lambda *_a, **_k: cap)
        self._set(torch.cuda, "get_device_name", lambda *_a, **_k: name)
        self._set(torch.version, "cuda", CUDA_VERSION)
        self._set(common, "get_nvgpu_memory_capacity", lambda *_a, **_k: float(self.gpu["memory_mib"]))
        # flashinfer is installed on every GPU node SGLang runs on (a dependency of its CUDA wheels and images; 0.5.19+
        # take the same fact as `has_flashinfer` above); this side venv has none. server_args.py and
        # arg_groups/overrides.py imported the probe by name.
        from sglang.srt import utils as utils_pkg
        from sglang.srt.arg_groups import overrides
        for module in (common, utils_pkg, sa_mod, overrides):
            if "is_flashinfer_available" in vars(module):
                self._set(module, "is_flashinfer_available", lambda: True)
        platform = CudaSRTPlatform()
        self._set(platforms, "_current_platform", platform)
        for module in (sa_mod, common):
            if "current_platform" in vars(module):
                self._set(module, "current_platform", platform)
        self._clear_caches()

    def __exit__(self, *_exc: object) -> None:
        for obj, name, value in reversed(self.saved):
            setattr(obj, name, value)
        self.saved.clear()
        self._clear_caches()


def _site(exc: BaseException) -> str:
    """Where SGLang raised: the innermost frame inside sglang/srt (file relative to sglang/, line)."""
    site = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if "/sglang/" in frame.filename:
            site = f"{frame.filename.split('/sglang/', 1)[1]}:{frame.lineno}"
    return site


@contextlib.contextmanager
def _environ(env: dict[str, str]) -> Iterator[None]:
    """The process's SGLANG_* environment as pdctl renders it (e.g. SGLANG_USE_HND_KVCACHE), restored after."""
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def op_resolve(case: dict[str, Any]) -> dict[str, Any]:
    """SGLang's verdict on one command line on one GPU: starts, or refuses with its message and raise site."""
    device = _Device if override_platform is not None else _LegacyDevice
    with _environ(case.get("env", {})), device(case["gpu"]):  # outside the try: a stand-in failing is the oracle's error, not a verdict
        said = io.StringIO()
        try:
            with contextlib.redirect_stderr(said):  # argparse's own words go to stderr
                args = sa_mod.prepare_server_args(list(case["argv"]))  # before 0.5.19 this runs the resolution
            if hasattr(args, "resolve_once"):
                args.resolve_once()
            args.check_server_args()
        except SystemExit as exc:  # argparse refusing a value
            words = (said.getvalue().strip().splitlines() or [f"exit {exc}"])[-1]  # "sglang serve: error: ..."
            return {"verdict": "refuses", "error": f"SystemExit: {words}", "site": "argparse"}
        except Exception as exc:  # noqa: BLE001 - every refusal is the answer
            return {"verdict": "refuses", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:400],
                    "site": _site(exc)}
    return {"verdict": "starts"}


if __name__ == "__main__":
    serve({"resolve": op_resolve})
