"""Eval settings from a topology's `eval.gsm8k` block, so that `pdctl eval gsm8k` after a launch needs no flags.

Why tolerant: the block is optional, the run dir may come from an older pdctl, and a topology may have moved;
none of that should stop an eval, which then uses the built-in defaults (SGLang's: 200 questions, 5 shots,
512 new tokens, 128 in flight, no floor). Options given on the command line always win.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pdctl.errors import UserError

BUILTIN: dict[str, Any] = {
    "num_questions": 200,
    "num_shots": 5,
    "max_new_tokens": 512,
    "parallel": 128,
    "floor": None,
}
_TOPOLOGY_KEYS = ("topology_path", "topology_file", "topology_source", "source_path")
_COPIES = ("topology.yaml", "topology.yml")


def _from_yaml(path: Path) -> dict[str, Any]:
    """The eval.gsm8k block of a topology file, via pdctl.topology when present, else plain YAML."""
    try:
        from pdctl.topology import load_topology
    except ImportError:
        load_topology = None
    if load_topology is not None:
        block = load_topology(path).eval.gsm8k
        return {k: getattr(block, k) for k in BUILTIN if getattr(block, k, None) is not None}
    import yaml

    try:
        doc = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise UserError(f"cannot read topology {path}: {exc}") from exc
    block = ((doc.get("eval") or {}).get("gsm8k") or {}) if isinstance(doc, dict) else {}
    return {k: block[k] for k in BUILTIN if block.get(k) is not None}


def topology_file_of_run(run_dir: Path, state: dict[str, Any]) -> Path | None:
    """The topology a run was launched from: a path recorded in state.json, or a copy in the run dir."""
    for key in _TOPOLOGY_KEYS:
        value = state.get(key)
        if isinstance(value, str) and Path(value).is_file():
            return Path(value)
    topo = state.get("topology")
    if isinstance(topo, dict):
        for key in ("path", "source", "file"):
            if isinstance(topo.get(key), str) and Path(topo[key]).is_file():
                return Path(topo[key])
    for name in _COPIES:
        if (run_dir / name).is_file():
            return run_dir / name
    return None


def _recorded_block(run_dir: Path, state: dict[str, Any]) -> tuple[dict[str, Any], str] | None:
    """An eval.gsm8k block that launch recorded in state.json or plan.json (when it copies it there)."""
    docs: list[tuple[Any, str]] = [(state, str(run_dir / "state.json"))]
    plan = run_dir / "plan.json"
    if plan.is_file():
        try:
            docs.append((json.loads(plan.read_text(encoding="utf-8")), str(plan)))
        except (OSError, ValueError):
            pass
    for doc, where in docs:
        block = ((doc.get("eval") or {}).get("gsm8k") or {}) if isinstance(doc, dict) else {}
        if isinstance(block, dict) and block:
            return {k: block[k] for k in BUILTIN if block.get(k) is not None}, f"eval.gsm8k in {where}"
    return None


def eval_defaults(topology: str | Path | None = None, run_dir: Path | None = None,
                  state: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """Built-in defaults overlaid with TOPOLOGY's (or the run's) eval.gsm8k block; and where they came from."""
    values = dict(BUILTIN)
    path: Path | None = Path(topology) if topology is not None else None
    if path is None and run_dir is not None:
        path = topology_file_of_run(run_dir, state or {})
    if path is None:
        recorded = _recorded_block(run_dir, state or {}) if run_dir is not None else None
        if recorded:
            values.update(recorded[0])
            return values, recorded[1]
        return values, "built-in defaults"
    if topology is not None and not path.is_file():
        raise UserError(f"topology file {path} does not exist")
    try:
        values.update(_from_yaml(path))
    except UserError:
        if topology is not None:
            raise
        return values, "built-in defaults (the run's topology could not be read)"
    return values, f"eval.gsm8k of {path}"
