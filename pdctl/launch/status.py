"""`pdctl status`: is each process of a run alive, does it answer its health check, and what are its live
figures (pdctl.metrics: requests/s, tokens/s, queue, KV usage, latency percentiles, transfer failures)?"""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pdctl.compat.capacity import estimate
from pdctl.compat.effective import effective
from pdctl.errors import UserError
from pdctl.executors import executor_for
from pdctl.launch.health import router_check, router_workers, worker_health, worker_is_healthy
from pdctl.launch.transfer_path import transfer_path
from pdctl.metrics.alarms import StallDetector
from pdctl.metrics.capacity import capacities
from pdctl.metrics.targets import router_target, worker_targets
from pdctl.metrics.watch import Watch
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.runs import DEPLOYMENT_FILE, read_state, resolve_run_dir
from pdctl.runs.state import TOPOLOGY_COPY, started
from pdctl.topology import load_topology


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
            router["healthy"], router["detail"] = routed_alive(router, processes, expected)
    ok = bool(processes) and all(p["healthy"] for p in processes) and bool(router["healthy"])
    sample = run_watch(path, state).sample()
    for entry in [*processes, router]:
        entry["metrics"] = sample.get(entry.get("name", "router"), {}).get("figures")
        entry["metrics_error"] = sample.get(entry.get("name", "router"), {}).get("error")
    serving = [r for r, p in zip(records, processes) if p["alive"] and r.get("url")]
    if serving:
        estimates, kind, why = role_estimates(path / TOPOLOGY_COPY)
        kv = capacities(serving, estimates, exact=kind == "reference", why=why)
        for entry in processes:
            if entry["name"] in kv:
                entry["kv_capacity"] = kv[entry["name"]]
    return {
        "ok": ok,
        "run_dir": str(path.resolve()),
        "topology": state.get("topology"),
        "state": state.get("status"),
        "processes": processes,
        "router": router,
    }


def routed_alive(router: dict[str, Any], processes: list[dict[str, Any]], expected: int) -> tuple[bool, str]:
    """(healthy, detail) of the router row: the workers that are really serving (their process runs and
    answers its health check, and the router routes to it) out of those launched. The router keeps listing a
    killed worker as healthy until its own checks catch up: its count alone said 2/2 with decode-0 dead."""
    serving = [p for p in processes if p["url"]]
    down = [p for p in serving if not p["healthy"]]
    listed = router.get("workers")
    if isinstance(listed, list):
        urls = {str(w.get("url", "")).rstrip("/") for w in listed if isinstance(w, dict) and worker_is_healthy(w)}
        unrouted = [p for p in serving if p["healthy"] and p["url"].rstrip("/") not in urls]
    else:
        unrouted = []
    alive = len(serving) - len(down) - len(unrouted)
    detail = f"{alive}/{expected} workers serving"
    if down:
        detail += " (" + ", ".join(f"{p['name']} {p['detail']}" for p in down) + ")"
    if unrouted:
        detail += " (not routed to: " + ", ".join(p["name"] for p in unrouted) + ")"
    ready = not str(router["detail"]).startswith("/readiness")
    if not ready:
        detail += f"; router {router['detail']}"
    return ready and alive >= expected and not down, detail


def role_estimates(topology_path: Path) -> tuple[dict[str, Any], str | None, str | None]:
    """(role name -> check-compat's KvEstimate, engine kind, None) for the topology at TOPOLOGY_PATH (the run's
    copy, rendered here once, as check-compat judges it), or ({}, None, why not)."""
    try:
        topo = load_topology(topology_path)
        spec = resolve_model_spec(topo.model, engine_kind=topo.engine.kind)
        eff = effective(render(topo))
    except (UserError, OSError) as exc:
        return {}, None, f"no estimate ({exc})"
    return {name: estimate(topo, spec, role) for name, role in eff.roles.items()}, topo.engine.kind, None


def run_watch(run_dir: Path, state: dict[str, Any] | None = None) -> Watch:
    """A metrics Watch over every HTTP-serving worker of the run and its router (status, status --watch)."""
    state = state if state is not None else read_state(run_dir)
    records = [r for r in state.get("processes", []) if started(r)]
    return Watch([*worker_targets(records), router_target(state, _deployment_doc(Path(run_dir)))])


def live(run_dir: Path, state: dict[str, Any], watch: Watch, detector: StallDetector | None = None) -> dict[str, Any]:
    """One refresh of `status --watch`: every process's and the router's figures over the last interval, and
    (with DETECTOR) the alarms of transfers that do not move (pdctl.metrics.alarms)."""
    sample = watch.sample()
    now = time.monotonic()
    records = [r for r in state.get("processes", []) if started(r) and r.get("url")]
    alarms: list[dict[str, Any]] = []

    def entry(name: str, extra: dict[str, Any]) -> dict[str, Any]:
        got = sample.get(name, {})
        out = {"name": name, **extra, "url": got.get("url"), "metrics": got.get("figures"), "error": got.get("error")}
        if detector is not None and name != "router":
            out["alarms"] = [a.to_dict() for a in detector.update(name, got.get("figures"), now)]
            alarms.extend(out["alarms"])
        return out

    processes = [entry(r["name"], {"role": r["role"], "replica": r["replica"], "node": r["node"]}) for r in records]
    return {
        "run_dir": str(Path(run_dir).resolve()),
        "topology": state.get("topology"),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "processes": processes,
        "router": entry("router", {"role": "router"}),
        "alarms": alarms,
    }


def _deployment_doc(run_dir: Path) -> dict[str, Any] | None:
    """plan.json of the run, or None when it is missing or unreadable (metrics are then best effort)."""
    try:
        doc = json.loads((run_dir / DEPLOYMENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
