"""pdctl preflight: facts gathered from the actual nodes through their executors (gather, probe), the checks
over them (checks/*, parsers/* for tool outputs), and the cross-node transfer test (transfer).

`run_preflight(topo, ...) -> PreflightReport` is the API; `pdctl preflight` renders it and `pdctl launch` runs it
first. Importing this package is cheap; the transfer test imports numpy and the backends when it runs.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "run_preflight": "pdctl.preflight.runner",
    "PreflightReport": "pdctl.preflight.report",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)


__all__ = ["PreflightReport", "run_preflight"]
