"""`pdctl runs`: the runs launched from this directory, past and live, newest first.

Where they are found: every run dir under ./.pdctl/runs/ (the default of `pdctl launch`), and every run dir
ever recorded as the latest (./.pdctl/history: launches given --run-dir elsewhere). Each run's state.json
says what was launched and when; a run that says it is running is looked at (pdctl.liveness: are its
processes still there?), so the list never calls a dead deployment live. Beside `status` (one run) in launch/:
both read run records and ask the executors about the processes they name.
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pdctl.liveness import check_run
from pdctl.runs import HISTORY_FILE, PDCTL_HOME, STATE_FILE

LIVE = ("running", "starting", "submitted")


@dataclass(frozen=True)
class RunInfo:
    """One run as `pdctl runs` lists it."""

    name: str
    run_dir: str
    state: str  # running | degraded | dead | stopped | failed | submitted | starting | unreadable
    started: str | None
    router: str | None
    executor: str | None
    detail: str = ""
    latest: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def run_dirs(home: Path = PDCTL_HOME) -> list[Path]:
    """Every run dir known here: under HOME/runs/ (a sweep's variants one level down), and those recorded in
    HOME/history (deduplicated)."""
    found: dict[str, Path] = {}
    for state in sorted([*(home / "runs").glob(f"*/{STATE_FILE}"), *(home / "runs").glob(f"*/*/{STATE_FILE}")]):
        found.setdefault(str(state.parent.resolve()), state.parent)
    try:
        lines = (home / HISTORY_FILE).read_text(encoding="utf-8").splitlines()
    except OSError:
        lines = []
    for line in lines:
        path = Path(line.strip())
        if line.strip() and (path / STATE_FILE).is_file():
            found.setdefault(str(path.resolve()), path)
    return list(found.values())


def describe(run_dir: Path, latest: str | None = None) -> RunInfo:
    """The row of RUN_DIR: its state.json, and for a run that says it is live, whether its processes are."""
    resolved = str(run_dir.resolve())
    try:
        doc: Any = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        doc = f"state.json: {exc}"
    if not isinstance(doc, dict):
        why = doc if isinstance(doc, str) else "state.json is not a JSON object"
        return RunInfo(run_dir.name, resolved, "unreadable", None, None, None, why, latest == resolved)
    status = str(doc.get("status") or "unknown")
    detail = ""
    if status in LIVE and doc.get("job_id") is None:
        try:
            verdict = check_run(run_dir)
        except Exception as exc:  # noqa: BLE001 -- one broken run must not hide the others
            status, detail = "unreadable", str(getattr(exc, "message", exc))
        else:
            if not verdict.ok:
                every = len(verdict.dead) >= verdict.checked
                status, detail = ("dead" if every else "degraded"), verdict.summary()
    elif doc.get("job_id") is not None:
        detail = f"slurm job {doc['job_id']}"
    router = doc.get("router") if isinstance(doc.get("router"), dict) else {}
    name = str(doc.get("topology") or run_dir.name)
    variant = doc.get("variant") if isinstance(doc.get("variant"), dict) else None
    if variant and variant.get("name"):  # one variant of a sweep (pdctl.launch.sweep)
        name = f"{name}/{variant['name']}"
    return RunInfo(name, resolved, status, doc.get("launched_at"),
                   router.get("url"), doc.get("executor") or _executor(doc), detail, latest == resolved)


def _executor(doc: dict[str, Any]) -> str | None:
    kinds = {p.get("executor") for p in doc.get("processes") or [] if isinstance(p, dict)}
    return ",".join(sorted(k for k in kinds if k)) or None


def list_runs(home: Path = PDCTL_HOME) -> list[RunInfo]:
    """Every run known here, newest first (the processes of live ones looked at in parallel)."""
    try:
        latest = str(Path((home / "latest").read_text(encoding="utf-8").strip()).resolve())
    except OSError:
        latest = None
    dirs = run_dirs(home)
    with ThreadPoolExecutor(max_workers=min(8, max(1, len(dirs)))) as pool:
        rows = list(pool.map(lambda d: describe(d, latest), dirs))
    return sorted(rows, key=lambda r: r.started or "", reverse=True)
