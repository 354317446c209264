"""pdctl launch: render a topology into commands, start them (local, ssh, slurm), supervise, tear down.

Python API (used by parity and tests): `launch_topology(topo, run_dir=None, *, timeout=..., skip_compat=False,
detach=True) -> state dict`, `teardown(run_dir)`, `render(topo) -> LaunchPlan`, `status(run_dir)`.
Attributes load lazily so that importing pdctl.launch stays cheap.
"""

from __future__ import annotations

from typing import Any

_EXPORTS = {
    "launch_topology": "pdctl.launch.supervisor",
    "teardown": "pdctl.launch.shutdown",
    "render": "pdctl.render.deployment",
    "status": "pdctl.launch.status",
    "LaunchPlan": "pdctl.render.spec",
    "ProcessSpec": "pdctl.render.spec",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(name)


__all__ = ["LaunchPlan", "ProcessSpec", "launch_topology", "render", "status", "teardown"]
