"""An inert stand-in for `sgl_kernel`, SGLang's kernel package, on a CPU without it.

Why: SGLang's CPU engine imports `sgl_kernel` at import time in 234 places (e.g.
`srt/kernels/ops/kvcache/cache_move.py`), but PyPI's sgl-kernel wheels are CUDA builds that cannot load here.
On a CPU, SGLang gates its CPU kernels on `hasattr(torch.ops.sgl_kernel, "convert_weight_packed")`
(`srt/utils/common.py:357`, `_is_intel_amx_backend_available`): a stand-in registers no torch op, so SGLang
logs "only intel amx backend and arm64 are supported" and takes its torch-native paths. Every name imports;
every call raises, naming the kernel, so a path that does call a kernel fails loudly instead of computing
anything.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
import types
from typing import Any

ROOT = "sgl_kernel"


class KernelCalled(RuntimeError):
    """A code path called one of SGLang's kernels; the stand-in has none."""


class _Inert:
    """A kernel name: attributes are further names, a call raises."""

    def __init__(self, path: str) -> None:
        self._path = path

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert(f"{self._path}.{name}")

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise KernelCalled(f"{self._path} was called, but this CPU server runs pdctl's inert stand-in for "
                           "sgl_kernel (pdctl.sglang_cpu.kernel_standin): SGLang took a kernel path; install "
                           "SGLang's CPU kernel package for this host")

    def __repr__(self) -> str:
        return f"<inert {self._path}>"


class _InertModule(types.ModuleType):
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return _Inert(f"{self.__name__}.{name}")


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, fullname: str, path: Any, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if fullname != ROOT and not fullname.startswith(ROOT + "."):
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = _InertModule(spec.name)
        module.__path__ = []  # a package: `sgl_kernel.kvcacheio` and the like import too
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        module.__pdctl_standin__ = True


def real_kernel_installed() -> bool:
    """Whether a real sgl_kernel is importable (then it is used, and no stand-in is installed)."""
    return any(not isinstance(f, _Finder) and _has(f) for f in sys.meta_path)


def _has(finder: Any) -> bool:
    find = getattr(finder, "find_spec", None)
    try:
        return find is not None and find(ROOT, None) is not None
    except Exception:  # noqa: BLE001 - a broken finder does not provide it
        return False


def install() -> bool:
    """Serve `sgl_kernel` from the stand-in unless a real one is installed; True when the stand-in is used."""
    if any(isinstance(f, _Finder) for f in sys.meta_path):
        return True
    if real_kernel_installed():
        return False
    sys.meta_path.append(_Finder())
    importlib.util.find_spec(ROOT)  # fail here, not at SGLang's first import, if the finder is broken
    return True
