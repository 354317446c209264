"""pdctl launch: one path from a topology to running processes (deploy), the verdicts it passes (gate), starting
and supervising them (supervisor), and a run's status, logs and teardown.

Python API (used by parity, bench serve and tests): `launch_topology(topo, run_dir=None, *, timeout=...,
skip_compat=False, detach=True) -> state dict`, `teardown(run_dir)`, `status(run_dir)`.
Attributes load lazily so that importing pdctl.launch stays cheap.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "launch_topology": "pdctl.launch.deploy",
    "teardown": "pdctl.launch.shutdown",
    "status": "pdctl.launch.status",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)


__all__ = ["launch_topology", "status", "teardown"]
