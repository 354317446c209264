"""`pdctl status`: is each process of a run alive, and does it answer its health check?"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pdctl.launch.executors import executor_for
from pdctl.launch.health import router_check, router_workers, worker_health
from pdctl.launch.state import started
from pdctl.launch.transfer_path import transfer_path
from pdctl.runs import read_state, resolve_run_dir


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
    return {
        "ok": ok,
        "run_dir": str(path.resolve()),
        "topology": state.get("topology"),
        "state": state.get("status"),
        "processes": processes,
        "router": router,
    }
