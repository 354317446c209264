"""Eval settings from a topology's `eval.gsm8k` block, so that `pdctl eval gsm8k` after a launch needs no flags.

Why tolerant: the block is optional, the run dir may come from an older pdctl, and a topology may have moved;
none of that should stop an eval, which then uses the built-in defaults (SGLang's: 200 questions, 5 shots,
512 new tokens, 128 in flight, no floor). Options given on the command line always win.
"""

from __future__ import annotations

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
# launch keeps the topology it launched as <run_dir>/topology.yaml and records the original's path in
# state.json as topology_path (pdctl.launch.state.record_topology).
_TOPOLOGY_COPY = "topology.yaml"


def _from_yaml(path: Path) -> dict[str, Any]:
    """The eval.gsm8k block of a topology file (validated by pdctl.topology: a bad file is a UserError)."""
    from pdctl.topology import load_topology

    block = load_topology(path).eval.gsm8k
    return {k: getattr(block, k) for k in BUILTIN if getattr(block, k, None) is not None}


def topology_file_of_run(run_dir: Path, state: dict[str, Any]) -> Path | None:
    """The topology a run was launched from: launch's copy in the run dir (what was launched, even if the
    original has been edited or moved since), else the path recorded in state.json."""
    copy = run_dir / _TOPOLOGY_COPY
    if copy.is_file():
        return copy
    recorded = state.get("topology_path")
    if isinstance(recorded, str) and Path(recorded).is_file():
        return Path(recorded)
    return None


def _recorded_block(state: dict[str, Any], run_dir: Path) -> tuple[dict[str, Any], str] | None:
    """An eval.gsm8k block recorded in state.json itself (a run dir without a readable topology file)."""
    block = (state.get("eval") or {}).get("gsm8k") if isinstance(state.get("eval"), dict) else None
    if isinstance(block, dict) and block:
        return {k: block[k] for k in BUILTIN if block.get(k) is not None}, f"eval.gsm8k in {run_dir / 'state.json'}"
    return None


def eval_defaults(topology: str | Path | None = None, run_dir: Path | None = None,
                  state: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """Built-in defaults overlaid with TOPOLOGY's (or the run's) eval.gsm8k block; and where they came from."""
    values = dict(BUILTIN)
    path: Path | None = Path(topology) if topology is not None else None
    if path is None and run_dir is not None:
        path = topology_file_of_run(run_dir, state or {})
    if path is None:
        recorded = _recorded_block(state or {}, run_dir) if run_dir is not None else None
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
