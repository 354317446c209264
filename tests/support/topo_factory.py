"""Build real Topology objects (through pdctl.topology's loader) from a base dict plus overrides."""

from __future__ import annotations

import copy
from typing import Any

from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology import build_topology

BASE: dict[str, Any] = {
    "name": "gpt-oss-120b-p1-d4",
    "engine": {"kind": "sglang", "version": "0.5.23"},
    "model": {"path": "openai/gpt-oss-120b", "preset": "gpt-oss-120b"},
    "nodes": [
        {"name": "p0", "host": "10.0.0.11", "gpu": "gb300", "gpus": 4},
        {"name": "d0", "host": "10.0.0.12", "gpu": "gb300", "gpus": 4},
    ],
    "transfer": {"backend": "nixl"},
    "prefill": {"nodes": ["p0"], "tp": 1},
    "decode": {"nodes": ["d0"], "tp": 4},
}


def merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _build(base: dict[str, Any], over: dict[str, Any]) -> tuple[Any, Any]:
    topo = build_topology(merge(base, over), source="<test>")
    return topo, resolve_model_spec(topo.model)


def make(**over: Any) -> tuple[Any, Any]:
    """(topology, model spec) for BASE with `over` deep-merged in (lists replace)."""
    return _build(BASE, over)


def rendered(**over: Any) -> tuple[Any, Any]:
    """(deployment, model spec) of make(**over): what check-compat judges (pdctl.render renders it once)."""
    topo, spec = make(**over)
    return render(topo), spec


def gpu(kind: str, p: int = 4, d: int = 4) -> list[dict[str, Any]]:
    return [
        {"name": "p0", "host": "10.0.0.11", "gpu": kind, "gpus": p},
        {"name": "d0", "host": "10.0.0.12", "gpu": kind, "gpus": d},
    ]


COLOCATED_BASE: dict[str, Any] = {
    "name": "gpt-oss-120b-colocated",
    "mode": "colocated",
    "engine": {"kind": "sglang", "version": "0.5.23"},
    "model": {"path": "openai/gpt-oss-120b", "preset": "gpt-oss-120b"},
    "nodes": [{"name": "n0", "host": "10.0.0.11", "gpu": "gb300", "gpus": 4}],
    "colocated": {"nodes": ["n0"], "tp": 4},
}


def make_colocated(**over: Any) -> tuple[Any, Any]:
    """(topology, model spec) for COLOCATED_BASE with `over` deep-merged in (lists replace)."""
    return _build(COLOCATED_BASE, over)
