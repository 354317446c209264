"""Where runs live, and how later commands find the latest one.

`pdctl launch` writes `<run_dir>/state.json` and records the run dir in `./.pdctl/latest`, so that
`pdctl status/logs/down/eval/parity` work without flags right after a launch (CLI.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.jsonfiles import read_json_object
from pdctl.render.kinds import process_kind

PDCTL_HOME = Path(".pdctl")
STATE_FILE = "state.json"
DEPLOYMENT_FILE = "plan.json"  # the rendered deployment of the run (its commands), named as users know it
HISTORY_FILE = "history"  # every run dir recorded as the latest, one a line (`pdctl runs` lists them)


def default_run_dir(topology_name: str) -> Path:
    """The run dir a launch of topology NAME uses when --run-dir is not given."""
    return PDCTL_HOME / "runs" / topology_name


def remember_latest(run_dir: Path) -> None:
    """Record RUN_DIR as the latest run, for commands run later without --run-dir (and in the history that
    `pdctl runs` lists)."""
    latest = PDCTL_HOME / "latest"
    try:
        PDCTL_HOME.mkdir(parents=True, exist_ok=True)
        latest.write_text(str(Path(run_dir).resolve()) + "\n", encoding="utf-8")
        with open(PDCTL_HOME / HISTORY_FILE, "a", encoding="utf-8") as history:
            history.write(str(Path(run_dir).resolve()) + "\n")
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
    for record in [*processes, *([router] if router else [])]:
        _check_record(record, path)
    return state


# Keys every started process record has (pdctl.runs.state.new_record), and their types.
_RECORD_KEYS: dict[str, type | tuple[type, ...]] = {"name": str, "role": str, "replica": int, "node": str}


def _check_record(record: dict[str, Any], path: Path) -> None:
    """A process record is usable: a started one has its identity keys, and its pid/pgid can be ones pdctl
    started. Why so strict: signalling pgid 0 (or 1, or -1) would hit the caller's own process group (or every
    process): a hand-edited or corrupt state.json must never make `pdctl down` kill the user's shell."""
    who = record.get("name") if isinstance(record.get("name"), str) else "a process"
    for key in ("pid", "pgid"):
        value = record.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value <= 1):
            raise UserError(f"{path}: {who} has {key} {value!r}, which is not a process pdctl started; "
                            "refusing to act on it")
    if not process_kind(record).started(record):
        return  # never started: nothing will be signalled or probed
    for key, kind in _RECORD_KEYS.items():
        if not isinstance(record.get(key), kind) or isinstance(record.get(key), bool):
            raise UserError(f"{path}: {who} has no valid `{key}` (not written by pdctl launch?)")
