"""`pdctl diff RUN_A RUN_B`: what differs between two runs' lock.json (pdctl.runs.lock), key by key: the
topology's keys (as launched: after --set, variant and profile), versions (pdctl, SGLang, flag table), node
facts (GPU, driver, CUDA, packages, architecture), image and model, and preflight's problems."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.runs.lock import read_lock

IGNORED = ("written_at", "topology.source")  # when and from where, not what ran


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{'a': {'b': [1, {'c': 2}]}} -> {'a.b[0]': 1, 'a.b[1].c': 2}; empty containers kept as values."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for key, item in value.items():
            out.update(flatten(item, f"{prefix}.{key}" if prefix else str(key)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, item in enumerate(value):
            out.update(flatten(item, f"{prefix}[{i}]"))
        return out
    return {prefix: value}


def section_of(key: str) -> str:
    """The part of the lock a key belongs to, for grouping: topology, engine, model, nodes, ..."""
    head = key.split(".", 1)[0].split("[", 1)[0]
    if key.startswith("topology.document."):
        return "topology"
    return head


def diff_locks(a: dict[str, Any], b: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per key whose value differs ({key, section, a, b}; a missing side is None), in A's order then
    B's."""
    fa, fb = flatten(a), flatten(b)
    rows = []
    for key in list(fa) + [k for k in fb if k not in fa]:
        if any(key == i or key.startswith(i + ".") for i in IGNORED):
            continue
        va, vb = fa.get(key), fb.get(key)
        if va != vb or (key in fa) != (key in fb):
            shown = key.replace("topology.document.", "topology: ", 1)
            rows.append({"key": shown, "section": section_of(key), "a": va, "b": vb})
    return rows


def diff_runs(run_a: Path, run_b: Path) -> dict[str, Any]:
    """The diff document of two run dirs."""
    a, b = read_lock(run_a), read_lock(run_b)
    rows = diff_locks(a, b)
    return {"a": str(run_a), "b": str(run_b), "same": not rows, "differences": rows}
