"""Eval settings from a topology's `eval.<name>` block, so that `pdctl eval gsm8k` after a launch needs no flags.

The block is optional: without one (or for a run dir of an older pdctl that recorded none) the eval's built-in
defaults apply (gsm8k: SGLang's 200 questions, 5 shots, 512 new tokens, 128 in flight, no floor), and the source
is said in the output and the JSON (`settings_from`). But a run whose topology can no longer be read is an
error, never a silent fallback: its `floor` would vanish and a gate meant to fail could pass (a false OK).
Options given on the command line always win.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.evals.base import Eval
from pdctl.runs.state import topology_file_of_run
from pdctl.topology import load_topology


def _from_yaml(ev: Eval, path: Path) -> dict[str, Any]:
    """The eval.<name> block of a topology file (validated by pdctl.topology: a bad file is a UserError)."""
    block = getattr(load_topology(path).eval, ev.name)
    return {k: getattr(block, k) for k in ev.defaults if getattr(block, k, None) is not None}


def _recorded_block(ev: Eval, state: dict[str, Any], run_dir: Path) -> tuple[dict[str, Any], str] | None:
    """An eval.<name> block recorded in state.json itself (a run dir without a readable topology file)."""
    block = (state.get("eval") or {}).get(ev.name) if isinstance(state.get("eval"), dict) else None
    if isinstance(block, dict) and block:
        return ({k: block[k] for k in ev.defaults if block.get(k) is not None},
                f"eval.{ev.name} in {run_dir / 'state.json'}")
    return None


def eval_defaults(ev: Eval, topology: str | Path | None = None, run_dir: Path | None = None,
                  state: dict[str, Any] | None = None) -> tuple[dict[str, Any], str]:
    """EV's built-in defaults overlaid with TOPOLOGY's (or the run's) eval.<name> block; and where they came
    from."""
    values = dict(ev.defaults)
    path: Path | None = Path(topology) if topology is not None else None
    if path is None and run_dir is not None:
        path = topology_file_of_run(run_dir, state or {})
    if path is None:
        recorded = _recorded_block(ev, state or {}, run_dir) if run_dir is not None else None
        if recorded:
            values.update(recorded[0])
            return values, recorded[1]
        return values, "built-in defaults"
    if topology is not None and not path.is_file():
        raise UserError(f"topology file {path} does not exist")
    try:
        values.update(_from_yaml(ev, path))
    except UserError as exc:
        if topology is not None:
            raise
        raise UserError(f"the topology of run {run_dir} ({path}) cannot be read, so its eval settings (floor "
                        f"included) are unknown: {exc.message}", detail="fix the file, or pass --topology FILE") from exc
    return values, f"eval.{ev.name} of {path}"
