"""The run directory of a launch: plan.json (the rendered deployment), state.json, logs/<process>.log.

state.json is rewritten after every process start (atomically), so that whatever happens to pdctl, the
pids and process groups of everything it started are on disk for `pdctl down`.
Keys (ARCHITECTURE.md): topology, run_dir, processes [{role, replica, node, pid, pgid, url, log, executor}],
router {url, metrics_url, pid, pgid, log}; plus name, host, node_rank, start_time, ssh per process, status,
launched_at, topology_path (the file launched; copied to <run_dir>/topology.yaml); srun steps add job_id, step,
launcher, job_owned; docker-wrapped processes their container.
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Any

import yaml

from pdctl.errors import UserError
from pdctl.render.kinds import process_kind
from pdctl.render.spec import Deployment, ProcessSpec
from pdctl.runs import DEPLOYMENT_FILE, STATE_FILE
from pdctl.sglang_cpu import NUMERICS_NOTE
from pdctl.topology.overrides import describe_overrides

TOPOLOGY_COPY = "topology.yaml"
# Every process a run starts carries its run dir in this variable (and its children inherit it), so that
# `pdctl down` finds the processes of a run whose state.json was deleted (pdctl.launch.shutdown).
RUN_ENV = "PDCTL_RUN_DIR"


def tagged(proc: ProcessSpec, run_dir: Path) -> ProcessSpec:
    """PROC with RUN_ENV set to RUN_DIR (absolute) in its environment."""
    return dataclasses.replace(proc, env={**proc.env, RUN_ENV: str(Path(run_dir).resolve())})


def make_run_dir(run_dir: Path) -> None:
    """Create RUN_DIR (and its parents); a --run-dir that cannot be a directory is bad input (exit 2)."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create run directory {run_dir}: {exc.strerror or exc}") from None


def write_whole(path: Path, text: str) -> None:
    """Write TEXT to PATH all or nothing (a temporary file, then an atomic rename): a reader never sees half a
    file, and a full or read-only filesystem leaves nothing half-written behind but a clear UserError (exit 2)
    naming the file, instead of a traceback."""
    tmp = path.with_name(path.name + ".tmp")
    try:
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise UserError(f"cannot write {path}: {exc.strerror or exc} (is its filesystem full or read-only? "
                        "free space there or pass another --run-dir)") from None


DRY_RUN_DIR = "dry-run"


def dry_run_dir(run_dir: Path) -> Path:
    """Where a dry run writes its deployment (and sbatch script): RUN_DIR, unless a launch keeps its records
    there (state.json: a live run, or a past one that `pdctl runs` lists), then RUN_DIR/dry-run, so that a dry
    run never changes what status, eval, down and the run history read."""
    return run_dir / DRY_RUN_DIR if (run_dir / STATE_FILE).exists() else run_dir


def write_deployment(run_dir: Path, deployment: Deployment) -> Path:
    """Write <run_dir>/plan.json (the rendered deployment: every command); returns its path."""
    make_run_dir(run_dir)
    path = run_dir / DEPLOYMENT_FILE
    write_whole(path, json.dumps(deployment.to_json(), indent=2) + "\n")
    return path


def numerics_notes(run_dir: Path | None) -> list[str]:
    """What the run's numerics are not (its plan.json's notes that say so: a gpt-oss model on a CPU node,
    pdctl.sglang_cpu.NUMERICS_NOTE); status, eval and parity print them and put them in their JSON."""
    if run_dir is None:
        return []
    try:
        notes = json.loads((Path(run_dir) / DEPLOYMENT_FILE).read_text(encoding="utf-8")).get("notes") or []
    except (OSError, ValueError, AttributeError):
        return []
    return [n for n in notes if n == NUMERICS_NOTE]


def log_path(run_dir: Path, proc: ProcessSpec) -> str:
    """Absolute log path of PROC: the same path on whichever node runs it."""
    return str((run_dir / "logs" / f"{proc.name}.log").resolve())


def public(record: dict[str, Any]) -> dict[str, Any]:
    """A record without in-memory fields (Popen handles are kept under '_' keys)."""
    return {k: v for k, v in record.items() if not k.startswith("_")}


def answers_within(record: dict[str, Any]) -> float:
    """Seconds within which RECORD's health endpoint answers (200 or 503) while its HTTP server runs, as its render
    said (`health_timeout_s`: SGLang's /health runs a one-token generate); 0 when it answers at once."""
    return float(record.get("health_timeout_s") or 0.0)


def new_record(proc: ProcessSpec, run_dir: Path) -> dict[str, Any]:
    """The state record of PROC before it starts (pid/pgid are filled in by the executor)."""
    return {
        "name": proc.name,
        "role": proc.role,
        "replica": proc.replica,
        "node": proc.node,
        "host": proc.host,
        "advertise": proc.advertise,
        "node_rank": proc.node_rank,
        "url": proc.url,
        "health_path": proc.health_path,
        "health_timeout_s": proc.health_timeout_s,
        "log": log_path(run_dir, proc),
        "executor": proc.executor,
        "ssh": proc.ssh,
        "pid": None,
        "pgid": None,
        "start_time": None,
    } | ({"metrics_url": proc.metrics_url} if proc.metrics_url else {}) | (
        {"container": proc.container} if proc.container else {})


class RunState:
    """The live state of one run, saved to <run_dir>/state.json on every change."""

    def __init__(self, run_dir: Path, deployment: Deployment) -> None:
        self.run_dir = Path(run_dir)
        self.doc: dict[str, Any] = {
            "topology": deployment.topology,
            "run_dir": str(self.run_dir.resolve()),
            "engine": deployment.engine,
            "status": "starting",
            "launched_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "router_url": deployment.router_url,
            "processes": [],
            "router": {"url": deployment.router_url, "metrics_url": deployment.router.metrics_url},
        }

    def record_topology(self, topo: Any) -> None:
        """Keep the topology with the run: `topology_path` (absolute) in state.json and a copy at
        <run_dir>/topology.yaml, so that later commands (`eval gsm8k` defaults, parity, the Slurm job) read what
        was launched, even after the original file is edited or moved; with `--set` overrides the copy is the
        document they produced (and state.json lists them). No-op for a topology built from text."""
        source_path = topo.source_path
        if source_path is None:
            return
        source = Path(source_path).resolve()
        copy = write_topology_copy(topo, self.run_dir)
        overrides = list(topo.overrides)
        if source == copy.resolve():  # launched from the copy (the Slurm job does): keep what the user launched
            before = current_state(self.run_dir)
            source = Path(before.get("topology_path") or source)
            overrides = overrides or list(before.get("overrides") or [])
        self.doc["topology_path"] = str(source)
        if overrides:
            self.doc["overrides"] = overrides
        for key in ("profile", "variant"):  # what the cluster profile resolved; which sweep variant this is
            if getattr(topo, key, None) is not None:
                self.doc[key] = getattr(topo, key)

    def add(self, record: dict[str, Any]) -> None:
        """Record a started process (the router goes under `router`)."""
        if record["role"] == "router":
            self.doc["router"] = record
        else:
            self.doc["processes"].append(record)
        self.save()

    def set_status(self, status: str) -> None:
        self.doc["status"] = status
        self.save()

    def records(self) -> list[dict[str, Any]]:
        """Every started process, workers first then the router (the live records, Popen handles kept)."""
        return all_records(self.doc)

    def save(self) -> None:
        write_state(self.run_dir, self.document())

    def document(self) -> dict[str, Any]:
        doc = dict(self.doc)
        doc["processes"] = [public(r) for r in self.doc["processes"]]
        doc["router"] = public(self.doc["router"])
        return doc


def write_topology_copy(topo: Any, run_dir: Path) -> Path:
    """<run_dir>/topology.yaml: the file TOPO was loaded from, or (with `--set` overrides, a sweep variant or a
    cluster profile) the document they produced, headed by a comment naming the file and what changed it.
    Returns its path."""
    make_run_dir(run_dir)
    copy = run_dir / TOPOLOGY_COPY
    if topo.document is not None:
        changed = [describe_overrides(topo.overrides)] if topo.overrides else []
        if topo.variant:
            changed.append(f"sweep variant {topo.variant['name']}")
        if topo.profile:
            changed.append(f"cluster profile {topo.profile['path']}")
        head = f"# {topo.source_path} with {'; '.join(changed) or 'no change'}\n"
        write_whole(copy, head + yaml.safe_dump(topo.document, sort_keys=False))
    elif Path(topo.source_path).resolve() != copy.resolve():
        write_whole(copy, Path(topo.source_path).read_text(encoding="utf-8"))
    return copy


def topology_file_of_run(run_dir: Path, state: dict[str, Any]) -> Path | None:
    """The topology a run was launched from: launch's copy in the run dir (what was launched, even if the
    original has been edited or moved since), else the path recorded in state.json; None if the run records
    neither. A recorded topology that is gone is a UserError: a silent fallback to built-in defaults would
    lose the settings it holds (eval's floor, parity's tolerance)."""
    copy = run_dir / TOPOLOGY_COPY
    if copy.is_file():
        return copy
    recorded = state.get("topology_path")
    if isinstance(recorded, str) and recorded:
        if not Path(recorded).is_file():
            raise UserError(
                f"the topology of run {run_dir} cannot be read any more ({copy} is missing and "
                f"{recorded} does not exist): its eval settings (floor included) would be lost",
                detail="restore the file, or give the settings explicitly (eval: --topology FILE or --floor/"
                "--num-questions/...; parity: --max-new-tokens/--tolerance) and a URL instead of --run-dir",
            )
        return Path(recorded)
    return None


def current_state(run_dir: Path) -> dict[str, Any]:
    """The run dir's state.json as it is now, {} if there is none or it is unreadable (for a reader that polls
    while another process writes it, or that only wants a hint from it)."""
    try:
        doc = json.loads((run_dir / STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def write_state(run_dir: Path, doc: dict[str, Any]) -> None:
    """Atomically replace <run_dir>/state.json (a reader never sees half a file)."""
    make_run_dir(run_dir)
    write_whole(run_dir / STATE_FILE, json.dumps(doc, indent=2) + "\n")


def started(record: dict[str, Any]) -> bool:
    """Whether a record is of a process that was started (has a pid, belongs to a submitted job, or runs in a
    Kubernetes pod)."""
    return process_kind(record).started(record)


def all_records(state: dict[str, Any]) -> list[dict[str, Any]]:
    """Workers then the router, from a state document (only processes that were started)."""
    out = [r for r in state.get("processes", []) if started(r)]
    router = state.get("router") or {}
    if started(router):
        out.append(router)
    return out
