"""`pdctl status`: is each process of a run alive, and does it answer its health check?"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pdctl.launch.executors import executor_for
from pdctl.launch.health import probe, router_ready, router_workers
from pdctl.launch.state import started
from pdctl.runs import read_state, resolve_run_dir


def _process_status(record: dict[str, Any]) -> dict[str, Any]:
    alive = executor_for(record).exit_code(record) is None
    detail = "running" if alive else "exited"
    healthy = alive
    if alive and record.get("url") and record.get("health_path"):
        healthy, detail = probe(record["url"] + record["health_path"])
    return {
        "name": record["name"],
        "role": record["role"],
        "replica": record["replica"],
        "node": record["node"],
        "pid": record["pid"],
        "pgid": record.get("pgid"),
        "url": record.get("url"),
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
    router_rec = state.get("router") or {}
    router: dict[str, Any] = {
        "url": router_rec.get("url"),
        "pid": router_rec.get("pid"),
        "healthy": False,
        "alive": False,
        "detail": "not started",
    }
    if started(router_rec):
        router = _process_status(router_rec)
        if router["alive"]:
            expected = sum(1 for p in processes if p["url"])
            router["healthy"], router["detail"] = router_ready(router_rec["url"], expected)
            router["workers"] = router_workers(router_rec["url"])
    ok = bool(processes) and all(p["healthy"] for p in processes) and bool(router["healthy"])
    return {
        "ok": ok,
        "run_dir": str(path.resolve()),
        "topology": state.get("topology"),
        "state": state.get("status"),
        "processes": processes,
        "router": router,
    }
