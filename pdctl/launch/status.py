"""`pdctl status`: is each process of a run alive, does it answer its health check, and what are its live
figures (pdctl.metrics: requests/s, tokens/s, queue, KV usage, latency percentiles, transfer failures)?"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pdctl.executors import executor_for
from pdctl.launch.health import router_check, router_workers, worker_health
from pdctl.launch.transfer_path import transfer_path
from pdctl.metrics.targets import router_target, worker_targets
from pdctl.metrics.watch import Watch
from pdctl.runs import DEPLOYMENT_FILE, read_state, resolve_run_dir
from pdctl.runs.state import started


def _process_status(record: dict[str, Any], *, probe_health: bool = True) -> dict[str, Any]:
    """The status entry of RECORD: alive, and (with PROBE_HEALTH) whether its health check passes."""
    alive = executor_for(record).exit_code(record) is None
    healthy, detail = (alive, "running") if alive else (False, "exited")
    if alive and probe_health:
        healthy, detail = worker_health(record)
    return {
        "name": record["name"],
        "role": record["role"],
        "replica": record["replica"],
        "node": record["node"],
        "pid": record["pid"],
        "pgid": record.get("pgid"),
        "url": record.get("url"),
        "advertise": record.get("advertise"),
        "executor": record.get("executor"),
        "alive": alive,
        "healthy": healthy,
        "detail": detail,
        "log": record.get("log"),
    }


def status(run_dir: str | Path | None = None) -> dict[str, Any]:
    """The status document (CLI.md): run_dir, processes [{role, replica, node, pid, url, healthy}], router,
    and `ok` = every process and the router healthy."""
    path = resolve_run_dir(run_dir)
    state = read_state(path)
    records = [r for r in state.get("processes", []) if started(r)]
    with ThreadPoolExecutor(max_workers=8) as pool:
        processes = list(pool.map(_process_status, records))
        prefill = [(p, r) for p, r in zip(processes, records) if r["role"] == "prefill" and r.get("node_rank", 0) == 0]
        for (entry, _), kv_path in zip(prefill, pool.map(transfer_path, [r for _, r in prefill])):
            entry["transfer_path"] = kv_path
    router_rec = state.get("router") or {}
    router: dict[str, Any] = {
        "url": router_rec.get("url"),
        "pid": router_rec.get("pid"),
        "healthy": False,
        "alive": False,
        "detail": "not started",
    }
    if started(router_rec):
        router = _process_status(router_rec, probe_health=False)  # the router's check is router_check
        if router["alive"]:
            expected = sum(1 for p in processes if p["url"])
            router["healthy"], router["detail"], workers = router_check(router_rec["url"], expected)
            router["workers"] = workers if workers is not None else router_workers(router_rec["url"])
    ok = bool(processes) and all(p["healthy"] for p in processes) and bool(router["healthy"])
    sample = run_watch(path, state).sample()
    for entry in [*processes, router]:
        entry["metrics"] = sample.get(entry.get("name", "router"), {}).get("figures")
        entry["metrics_error"] = sample.get(entry.get("name", "router"), {}).get("error")
    return {
        "ok": ok,
        "run_dir": str(path.resolve()),
        "topology": state.get("topology"),
        "state": state.get("status"),
        "processes": processes,
        "router": router,
    }


def run_watch(run_dir: Path, state: dict[str, Any] | None = None) -> Watch:
    """A metrics Watch over every HTTP-serving worker of the run and its router (status, status --watch)."""
    state = state if state is not None else read_state(run_dir)
    records = [r for r in state.get("processes", []) if started(r)]
    return Watch([*worker_targets(records), router_target(state, _plan(Path(run_dir)))])


def live(run_dir: Path, state: dict[str, Any], watch: Watch) -> dict[str, Any]:
    """One refresh of `status --watch`: every process's and the router's figures over the last interval."""
    sample = watch.sample()
    records = [r for r in state.get("processes", []) if started(r) and r.get("url")]

    def entry(name: str, extra: dict[str, Any]) -> dict[str, Any]:
        got = sample.get(name, {})
        return {"name": name, **extra, "url": got.get("url"), "metrics": got.get("figures"),
                "error": got.get("error")}

    return {
        "run_dir": str(Path(run_dir).resolve()),
        "topology": state.get("topology"),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "processes": [entry(r["name"], {"role": r["role"], "replica": r["replica"], "node": r["node"]})
                      for r in records],
        "router": entry("router", {"role": "router"}),
    }


def _plan(run_dir: Path) -> dict[str, Any] | None:
    """plan.json of the run, or None when it is missing or unreadable (metrics are then best effort)."""
    try:
        doc = json.loads((run_dir / DEPLOYMENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
