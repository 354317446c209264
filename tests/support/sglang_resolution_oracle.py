"""SGLang's own start-up argument resolution, as an oracle: a worker run by the side venv's interpreter (0.5.23,
or an older release's overlay first on PYTHONPATH).

    PDCTL_SGLANG_PYTHON tests/support/sglang_resolution_oracle.py   (tests/sglang/test_resolution.py starts it)

One request per line: {"op": "resolve", "cases": [{"argv": [...], "gpu": {...}}]}. For each case it does what
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
This file must run without pdctl (it is not on the side venv's path).
"""

from __future__ import annotations

import traceback
from typing import Any

import torch
from sglang.srt import server_args as sa_mod
from sglang_parser_oracle import serve  # the parser worker beside this file

try:  # 0.5.20+: SGLang's own platform override, and the facts this release knows
    from sglang.srt import runtime_context
    from sglang.srt.runtime_context import override_platform
    KNOWN = set(runtime_context._PLATFORM_PROBES) | set(runtime_context._PLATFORM_VALUES)
except (ImportError, AttributeError):  # pragma: no cover - older releases
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
        import importlib.util

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


def _site(exc: BaseException) -> str:
    """Where SGLang raised: the innermost frame inside sglang/srt (file relative to sglang/, line)."""
    site = ""
    for frame in traceback.extract_tb(exc.__traceback__):
        if "/sglang/" in frame.filename:
            site = f"{frame.filename.split('/sglang/', 1)[1]}:{frame.lineno}"
    return site


def op_resolve(case: dict[str, Any]) -> dict[str, Any]:
    """SGLang's verdict on one command line on one GPU: starts, or refuses with its message and raise site."""
    if override_platform is None:
        return {"verdict": "unsupported", "error": "this release has no runtime_context.override_platform"}
    with _Device(case["gpu"]):  # outside the try: a stand-in failing is the oracle's error, not a verdict
        try:
            args = sa_mod.prepare_server_args(list(case["argv"]))
            args.resolve_once()
            args.check_server_args()
        except SystemExit as exc:  # argparse refusing a value
            return {"verdict": "refuses", "error": f"SystemExit: {exc}", "site": "argparse"}
        except Exception as exc:  # noqa: BLE001 - every refusal is the answer
            return {"verdict": "refuses", "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:400],
                    "site": _site(exc)}
    return {"verdict": "starts"}


if __name__ == "__main__":
    serve({"resolve": op_resolve})
