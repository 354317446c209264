"""Where runs live, and how later commands find the latest one.

`pdctl launch` writes `<run_dir>/state.json` and records the run dir in `./.pdctl/latest`, so that
`pdctl status/logs/down/eval/parity` work without flags right after a launch (CLI.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.jsonfiles import read_json_object

PDCTL_HOME = Path(".pdctl")
STATE_FILE = "state.json"
PLAN_FILE = "plan.json"


def default_run_dir(topology_name: str) -> Path:
    """The run dir a launch of topology NAME uses when --run-dir is not given."""
    return PDCTL_HOME / "runs" / topology_name


def remember_latest(run_dir: Path) -> None:
    """Record RUN_DIR as the latest run, for commands run later without --run-dir."""
    latest = PDCTL_HOME / "latest"
    try:
        PDCTL_HOME.mkdir(parents=True, exist_ok=True)
        latest.write_text(str(Path(run_dir).resolve()) + "\n", encoding="utf-8")
    except OSError as exc:
        raise UserError(f"cannot record the latest run in {latest}: {exc.strerror or exc}") from None


def resolve_run_dir(run_dir: str | Path | None) -> Path:
    """The given run dir, or the latest one launched from this directory; a clear error if neither exists."""
    if run_dir is not None:
        path = Path(run_dir)
        if not (path / STATE_FILE).exists():
            raise UserError(f"{path} is not a pdctl run directory (no {STATE_FILE}); was it launched?")
        return path
    latest = PDCTL_HOME / "latest"
    if not latest.exists():
        raise UserError("no run given and no latest run recorded: pass --run-dir, or `pdctl launch` first")
    path = Path(latest.read_text(encoding="utf-8").strip())
    if not (path / STATE_FILE).exists():
        raise UserError(f"the latest run {path} has no {STATE_FILE}; pass --run-dir")
    return path


def read_state(run_dir: str | Path | None) -> dict[str, Any]:
    """The state document of a run (see pdctl.launch for its keys: processes, router, ...).

    state.json is pdctl's own file, but it can be edited or truncated by hand: its top-level shape is
    checked here, so that every command reading it fails with a message instead of a traceback."""
    path = resolve_run_dir(run_dir) / STATE_FILE
    state = read_json_object(path, "run state")
    processes, router = state.get("processes", []), state.get("router", {})
    if not isinstance(processes, list) or not all(isinstance(p, dict) for p in processes):
        raise UserError(f"{path}: run state has no valid `processes` list (not written by pdctl launch?)")
    if router is not None and not isinstance(router, dict):
        raise UserError(f"{path}: run state has no valid `router` object (not written by pdctl launch?)")
    return state


def router_url(run_dir: str | Path | None) -> str:
    """The router URL of a run: what `eval` and `parity` talk to after `pdctl launch`."""
    state = read_state(run_dir)
    url = (state.get("router") or {}).get("url")
    if not url:
        raise UserError(f"run {resolve_run_dir(run_dir)} has no router URL in its state")
    return str(url)
