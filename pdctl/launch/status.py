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
from pdctl.executors import executor_for, shared_connections
from pdctl.launch.gpus import GpuWatch, executor_kind
from pdctl.launch.health import (
    PROBE_TIMEOUT_S,
    router_check,
    router_workers,
    worker_health,
    worker_is_healthy,
)
from pdctl.launch.transfer_path import transfer_path
from pdctl.liveness import STOPPED_STATES, HealthClock, check_run, patiently, process_state
from pdctl.metrics.alarms import StallDetector
from pdctl.metrics.bottleneck import Sample, judge, sample_of
from pdctl.metrics.capacity import capacities
from pdctl.metrics.scrape import fetch
from pdctl.metrics.targets import router_target, worker_targets
from pdctl.metrics.watch import Watch
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.runs import DEPLOYMENT_FILE, read_state, resolve_run_dir
from pdctl.runs.state import TOPOLOGY_COPY, answers_within, numerics_notes, started
from pdctl.topology import load_topology


def hung_detail(record: dict[str, Any], what: str, state: str | None = None) -> str | None:
    """`hung: no answer to /health within 3 s, process state T (stopped)` when WHAT (a probe's failure) says
    the running RECORD gave no HTTP answer at all (pdctl.liveness's rule), else None."""
    if "Timeout" not in what:
        return None
    state = state or process_state(record)
    waited = PROBE_TIMEOUT_S if state in STOPPED_STATES else max(PROBE_TIMEOUT_S, answers_within(record))
    detail = f"hung: no answer to {record.get('health_path') or '/health'} within {waited:g} s"
    if state:
        detail += f", process state {state}" + (f" ({STOPPED_STATES[state]})" if state in STOPPED_STATES else "")
    return detail


def _process_status(record: dict[str, Any], *, probe_health: bool = True) -> dict[str, Any]:
    """The status entry of RECORD: alive, and (with PROBE_HEALTH) whether its health check passes; its `state`
    (CLI.md): healthy (answers 200, or runs and serves no HTTP), starting (runs, answers no 200 yet), hung (runs,
    no HTTP answer at all), exited; `recovering` is set later (mark_recovering). An executor that knows its
    processes' health itself (kubernetes: the pod's readiness, restarts, reason) says it."""
    executor = executor_for(record)
    own = executor.health(record)
    pod: dict[str, Any] = {}
    if own is not None:
        pod = dict(own)
        alive, healthy, detail = pod.pop("alive"), pod.pop("healthy"), pod.pop("detail")
        condition = "healthy" if healthy else ("starting" if alive else "exited")
    else:
        alive = executor.exit_code(record) is None
        healthy, detail = (alive, "running") if alive else (False, "exited")
        condition = "healthy" if alive else "exited"
        if alive and probe_health:
            # an HTTP answer (200 or not) or a refused connection is an answer; only a timeout waits longer
            (healthy, detail), state = patiently(record, lambda timeout: worker_health(record, timeout=timeout),
                                                 lambda got: got[0] or "Timeout" not in got[1])
            hung = None if healthy else hung_detail(record, detail, state)
            condition = "healthy" if healthy else ("hung" if hung else "starting")
            detail = hung or detail
    return pod | {
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
        "state": condition,
        "detail": detail,
        "log": record.get("log"),
    }


def status(run_dir: str | Path | None = None) -> dict[str, Any]:
    """The status document (CLI.md): run_dir, processes [{role, replica, node, pid, url, healthy}], router,
    and `ok` = every process and the router healthy. Over ssh, one connection per node serves every question
    (pdctl.executors.shared_connections)."""
    with shared_connections():
        return _status(run_dir)


def _status(run_dir: str | Path | None) -> dict[str, Any]:
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
            healthy, detail, workers = router_check(router_rec["url"], expected)
            router["workers"] = workers if workers is not None else router_workers(router_rec["url"])
            if router["workers"] is None and "pod" in router:
                # an in-cluster URL not reachable from here: the router pod's readiness (its /readiness, run by
                # the kubelet) and the worker pods' are what is known
                pod_ready, pod_detail = router["healthy"], router["detail"]
                serving, router["detail"] = routed_alive(router, processes, expected)
                router["healthy"] = pod_ready and serving
                router["detail"] += f"; pod {pod_detail}; its URL is not reachable from here"
                router["state"] = "healthy" if router["healthy"] else "unhealthy"
            else:
                router["healthy"], router["detail"] = healthy, detail
                hung = hung_detail(router_rec, detail)
                router["healthy"], router["detail"] = routed_alive(router, processes, expected)
                router["state"] = "hung" if hung else ("healthy" if router["healthy"] else "unhealthy")
                if hung:
                    router["detail"] = hung
                else:
                    mark_recovering(processes, router, open_circuits(router_target(state, _deployment_doc(path)).url))
    ok = bool(processes) and all(p["healthy"] for p in processes) and bool(router["healthy"])
    sample = run_watch(path, state).sample()
    for entry in [*processes, router]:
        entry["metrics"] = sample.get(entry.get("name", "router"), {}).get("figures")
        entry["metrics_error"] = sample.get(entry.get("name", "router"), {}).get("error")
    serving = [r for r, p in zip(records, processes) if p["alive"] and r.get("url")]
    if serving:
        estimates, why = role_estimates(path / TOPOLOGY_COPY)
        kv = capacities(serving, estimates, why=why)
        for entry in processes:
            if entry["name"] in kv:
                entry["kv_capacity"] = kv[entry["name"]]
    gpus = run_gpus(path, state)
    return {
        "ok": ok,
        "run_dir": str(path.resolve()),
        "topology": state.get("topology"),
        "state": state.get("status"),
        "numerics_notes": numerics_notes(path),  # e.g. gpt-oss on a CPU node: not gpt-oss's numerics
        "processes": processes,
        "router": router,
        "gpus": gpus.sample() if gpus is not None else {},
        "bottleneck": judge([]).document() | {
            "evidence": ["one look has no interval to judge: `pdctl status --watch` judges the last refreshes"]},
    }


def run_gpus(run_dir: Path, state: dict[str, Any]) -> GpuWatch | None:
    """The GPU telemetry reader of a run's nodes (pdctl.launch.gpus), or None without the run's topology copy."""
    try:
        topo = load_topology(Path(run_dir) / TOPOLOGY_COPY)
    except (UserError, OSError):
        return None
    return GpuWatch(topo, executor_kind(state))


# sglang-router's smg_worker_cb_state gauge: 0 closed (requests flow), 1 open, 2 half-open (a trial request)
CIRCUIT_STATES = {1.0: "open", 2.0: "half-open"}


def open_circuits(metrics_url: str | None) -> dict[str, str]:
    """Worker URL -> 'open' or 'half-open' for each circuit the router keeps from closing, from its Prometheus
    metrics (empty when they cannot be read: then only its /workers health says who it routes to)."""
    if not metrics_url:
        return {}
    scrape = fetch(metrics_url)
    if isinstance(scrape, str):
        return {}
    return {str(labels.get("worker", "")).rstrip("/"): CIRCUIT_STATES.get(value, f"state {value:g}")
            for labels, value in scrape.series("smg_worker_cb_state") if value}


def mark_recovering(processes: list[dict[str, Any]], router: dict[str, Any], circuits: dict[str, str]) -> None:
    """A worker that answers its health check again while the router does not route to it yet (its circuit
    open, or /workers still calls it unhealthy) is `recovering`: it serves again within seconds on its own
    (pdctl.render.router.RECOVERY_FLAGS); the router row says so."""
    listed = router.get("workers")
    unhealthy = ({str(w.get("url", "")).rstrip("/") for w in listed if isinstance(w, dict) and not worker_is_healthy(w)}
                 if isinstance(listed, list) else set())
    back = []
    for entry in processes:
        url = str(entry.get("url") or "").rstrip("/")
        if not url or entry.get("state") != "healthy" or (url not in circuits and url not in unhealthy):
            continue
        why = f"circuit {circuits[url]}" if url in circuits else "marked unhealthy until its next health check"
        entry.update(healthy=False, state="recovering",
                     detail=f"recovering: answers its health check; the router's {why}")
        back.append(entry["name"])
    if back:
        router["healthy"] = False
        router["detail"] = f"{router['detail']}; recovering: {', '.join(back)}"


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


def role_estimates(topology_path: Path) -> tuple[dict[str, Any], str | None]:
    """(role name -> check-compat's KvEstimate, None) for the topology at TOPOLOGY_PATH (the run's copy, rendered
    here once, as check-compat judges it), or ({}, why not)."""
    try:
        topo = load_topology(topology_path)
        spec = resolve_model_spec(topo.model, engine_kind=topo.engine.kind)
        eff = effective(render(topo))
    except (UserError, OSError) as exc:
        return {}, f"no estimate ({exc})"
    return {name: estimate(topo, spec, role) for name, role in eff.roles.items()}, None


def run_watch(run_dir: Path, state: dict[str, Any] | None = None) -> Watch:
    """A metrics Watch over every HTTP-serving worker of the run and its router (status, status --watch)."""
    state = state if state is not None else read_state(run_dir)
    records = [r for r in state.get("processes", []) if started(r)]
    return Watch([*worker_targets(records), router_target(state, _deployment_doc(Path(run_dir)))])


def live(run_dir: Path, state: dict[str, Any], watch: Watch, detector: StallDetector | None = None,
         clock: HealthClock | None = None, gpus: GpuWatch | None = None,
         history: list[Sample] | None = None) -> dict[str, Any]:
    """One refresh of `status --watch`: every process's and the router's figures over the last interval, and
    (with DETECTOR) the alarms of transfers that do not move (pdctl.metrics.alarms); with CLOCK (kept across
    refreshes), each process's state: `exited`, `hung` (alive, no answer to its health check, and for how
    long: `unanswered_s`) or `healthy` (pdctl.liveness); with GPUS, each node's GPU telemetry; with HISTORY (kept
    across refreshes: this refresh's sample is appended, the last WINDOW kept), the bottleneck verdict."""
    sample = watch.sample()
    looks = {d.name: d for d in check_run(run_dir, clock=clock).dead} if clock is not None else {}
    now = time.monotonic()
    records = [r for r in state.get("processes", []) if started(r) and r.get("url")]
    alarms: list[dict[str, Any]] = []

    def entry(name: str, extra: dict[str, Any]) -> dict[str, Any]:
        got = sample.get(name, {})
        out = {"name": name, **extra, "url": got.get("url"), "metrics": got.get("figures"), "error": got.get("error")}
        if clock is not None:
            bad = looks.get(name)
            out["state"] = "healthy" if bad is None else ("hung" if bad.hung else "exited")
            out["unanswered_s"] = None if bad is None or not bad.hung else round(bad.hung_for_s or 0.0, 1)
            out["proc_state"] = None if bad is None else bad.state
        if detector is not None and name != "router":
            out["alarms"] = [a.to_dict() for a in detector.update(name, got.get("figures"), now)]
            alarms.extend(out["alarms"])
        return out

    processes = [entry(r["name"], {"role": r["role"], "replica": r["replica"], "node": r["node"]}) for r in records]
    router = entry("router", {"role": "router"})
    gpu_docs = gpus.sample() if gpus is not None else {}
    verdict = None
    if history is not None:
        util = {n: d["summary"]["util_pct_mean"] for n, d in gpu_docs.items()
                if d.get("summary") and d["summary"].get("util_pct_mean") is not None}
        history.append(sample_of(processes, router, util))
        del history[:-WINDOW]
        verdict = judge(history).document()
    return {
        "run_dir": str(Path(run_dir).resolve()),
        "topology": state.get("topology"),
        "at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "processes": processes,
        "router": router,
        "alarms": alarms,
        "gpus": gpu_docs,
        "bottleneck": verdict,
    }


WINDOW = 3  # status --watch judges the bottleneck over the last this many refreshes


def _deployment_doc(run_dir: Path) -> dict[str, Any] | None:
    """plan.json of the run, or None when it is missing or unreadable (metrics are then best effort)."""
    try:
        doc = json.loads((run_dir / DEPLOYMENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) else None
