"""`pdctl restart ROLE[:REPLICA]`: start one dead (or hung) process of a run again, in place, from the command
launch rendered for it (plan.json), and wait until it serves and the router routes to it again.

Why in place and not a relaunch: one decode that crashed should not cost the prefill's warm caches and every
other replica a restart. The process gets the same command, ports and log path (the old log is kept beside
it as `<name>.log.prev`, so its last lines survive); its state.json record is replaced. The router of a PD
deployment keeps the worker's URL from its command line: once the worker answers its health check again the
router's checks take it back (pdctl.render.router.RECOVERY_FLAGS: seconds), which this command waits for.
Health is not the proof: a restarted prefill or decode then sends one generate per pair it forms, straight to
the pair the way the router sends it, and succeeds only when the decode answers from KV that crossed the link
(pdctl.launch.pair_probe; sglang#33789: both sides healthy, nothing served); a pair that fails names the peer
that must restart too.

Executors: local and ssh processes restart through the executor that started them. Processes started as
Slurm steps (srun) are refused: a step cannot be added back to a job's allocation from here reliably; `pdctl
down` and launch (or sbatch) again.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdctl.diagnose.collect import with_diagnosis
from pdctl.errors import CheckFailed, UserError
from pdctl.executors import executor_for
from pdctl.launch import pair_probe
from pdctl.launch.health import router_workers, worker_health, worker_is_healthy
from pdctl.launch.shutdown import stop_records
from pdctl.liveness import LOG_TAIL_LINES, HealthClock, check_run
from pdctl.render.kinds import process_kind
from pdctl.render.spec import ProcessSpec
from pdctl.runs import DEPLOYMENT_FILE, read_state, resolve_run_dir
from pdctl.runs.state import new_record, public, tagged, write_state

ROLES = ("prefill", "decode", "colocated", "router")
POLL_S = 0.5  # how often the wait for health looks


def parse_target(text: str) -> tuple[str, int]:
    """'decode', 'decode:1', 'router' -> (role, replica); UserError (exit 2) otherwise."""
    role, _, replica = text.partition(":")
    if role not in ROLES:
        raise UserError(f"restart takes ROLE[:REPLICA] with ROLE one of {', '.join(ROLES)}, got {text!r}")
    if replica and not replica.isdigit():
        raise UserError(f"the replica in {text!r} must be a number (decode:0)")
    return role, int(replica or 0)


def _all_specs(run_dir: Path, role: str) -> list[ProcessSpec]:
    """The rendered processes from the run's plan.json: the router's (ROLE router), else every worker's."""
    try:
        doc = json.loads((run_dir / DEPLOYMENT_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot read {run_dir / DEPLOYMENT_FILE}: {exc}") from exc
    names = {f.name for f in dataclasses.fields(ProcessSpec)}
    entries = [doc.get("router")] if role == "router" else list(doc.get("processes") or [])
    return [ProcessSpec(**{k: v for k, v in e.items() if k in names}) for e in entries if isinstance(e, dict)]


def _specs(run_dir: Path, role: str, replica: int) -> list[ProcessSpec]:
    """The rendered processes of ROLE:REPLICA (every node rank) from the run's plan.json."""
    return [s for s in _all_specs(run_dir, role) if s.role == role and s.replica == replica]


def restart(run_dir: str | Path | None, target: str, *, timeout_s: float = 300.0, force: bool = False,
            say: Callable[[str], None] = lambda _m: None) -> dict[str, Any]:
    """Restart TARGET (ROLE[:REPLICA]) of the run in RUN_DIR: refuse while it serves (unless FORCE), stop what is
    left of it (a hung process), start it from plan.json, wait until it answers and the router routes to it.
    Returns {"restarted": [names], "pids": [...], "ready_after_s": float}."""
    role, replica = parse_target(target)
    path = resolve_run_dir(run_dir)
    state = read_state(path)
    if state.get("status") == "stopped":
        raise UserError(f"run {path} was stopped (pdctl down); launch it again instead")
    specs = _specs(path, role, replica)
    if not specs:
        raise UserError(f"run {path} has no {role}:{replica} (its plan.json lists none)")
    old = [r for r in _records(state) if r.get("role") == role and int(r.get("replica") or 0) == replica]
    refusal = next((why for why in (process_kind(r).restart for r in old) if why), None)
    if refusal is not None:
        raise UserError(f"{target} {refusal}")
    bad = {d.name for d in check_run(path, clock=HealthClock()).dead}
    serving = [r["name"] for r in old if r["name"] not in bad]
    if serving and not force:
        raise UserError(f"{target} runs and answers ({', '.join(serving)}): nothing to restart "
                        "(--force restarts it anyway)")
    say(f"stopping what is left of {target}")
    stop_records(old, grace_s=5.0)
    start = time.monotonic()
    records = []
    for spec in specs:
        record = new_record(spec, path)
        _keep_old_log(record)
        say(f"starting {spec.name} on node {spec.node}")
        record.update(executor_for(spec).start(tagged(spec, path), record["log"]))
        records.append(record)
        _replace(path, record)
    for record in records:
        try:
            _wait_serving(record, start + timeout_s)
        except CheckFailed as exc:  # the restarted process died or never served: why, from the run's logs
            raise with_diagnosis(exc, path, live=True) from None
    if role != "router":
        router = (read_state(path).get("router") or {}).get("url")
        for record in records:
            if record.get("url") and router:
                say(f"waiting for the router to route to {record['name']}")
                _wait_routed(router, record, start + timeout_s)
    ready = round(time.monotonic() - start, 1)
    proved = _prove_link(path, role, replica, records, say, deadline=start + timeout_s)
    return {"restarted": [r["name"] for r in records], "pids": [r["pid"] for r in records],
            "ready_after_s": ready, "link_proved": proved}


def _prove_link(run_dir: Path, role: str, replica: int, records: list[dict[str, Any]],
                say: Callable[[str], None], *, deadline: float) -> list[str]:
    """One generate per PD pair the restarted replica forms, its KV over the link; CheckFailed naming the pair
    and the peer to restart when one fails. Returns the pairs proved ('prefill-0 -> decode-0')."""
    specs = _all_specs(run_dir, role)
    backend = next((a for s in specs for i, a in enumerate(s.argv[1:])
                    if s.argv[i] == "--disaggregation-transfer-backend"), None)
    head = next((r for r in records if r.get("url")), records[0])
    proved = []
    for pair in pair_probe.pairs_of(specs, role, replica):
        say(f"sending a generate whose KV crosses {pair.words}")
        wait = min(pair_probe.PROBE_TIMEOUT_S, max(pair_probe.MIN_PROBE_S, deadline - time.monotonic()))
        problem = pair_probe.probe(pair, timeout=wait)
        if problem is not None:
            raise CheckFailed(f"{head['name']} serves and is routed to, but a generate over {pair.words} failed: "
                              f"{problem}; {pair_probe.peer_advice(pair, head['name'], backend)}")
        proved.append(pair.words)
    return proved


def _records(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(state.get("processes") or []), *([state["router"]] if state.get("router") else [])]


def _keep_old_log(record: dict[str, Any]) -> None:
    """Keep the dead process's log as <log>.prev: the fresh start truncates <log>."""
    executor = executor_for(record)
    executor.run(["sh", "-c", 'test -f "$1" && mv -f "$1" "$1.prev"; true', "sh", record["log"]], timeout=30)


def _replace(run_dir: Path, record: dict[str, Any]) -> None:
    """Put RECORD in place of the record of the same name in state.json (written at once, for `pdctl down`)."""
    state = read_state(run_dir)
    if record["role"] == "router":
        state["router"] = public(record)
    else:
        state["processes"] = [public(record) if r.get("name") == record["name"] else r
                              for r in state.get("processes") or []]
    write_state(run_dir, state)


def _wait_serving(record: dict[str, Any], deadline: float) -> None:
    """Until RECORD's process answers its health check; CheckFailed naming it with its log tail if it exits
    or the deadline passes."""
    executor = executor_for(record)
    what = "no health check"
    while time.monotonic() < deadline:
        code = executor.exit_code(record)
        if code is not None:
            raise _failed(record, f"exited with code {code} after the restart")
        ok, what = worker_health(record)
        if ok:
            return
        time.sleep(POLL_S)
    raise _failed(record, f"was not healthy within the timeout after the restart (last: {what})")


def _wait_routed(router_url: str, record: dict[str, Any], deadline: float) -> None:
    """Until the router lists RECORD's URL as healthy (its health checks took the worker back)."""
    url = str(record["url"]).rstrip("/")
    while time.monotonic() < deadline:
        workers = router_workers(router_url) or []
        if any(str(w.get("url", "")).rstrip("/") == url and worker_is_healthy(w) for w in workers):
            return
        time.sleep(POLL_S)
    raise CheckFailed(f"{record['name']} serves again but the router at {router_url} does not route to it within the "
                      f"timeout; `pdctl status` shows its circuit")


def _failed(record: dict[str, Any], how: str) -> CheckFailed:
    tail = executor_for(record).read_log(record, LOG_TAIL_LINES)
    return CheckFailed(f"{record['name']} on node {record['node']} {how}",
                       detail=f"--- last lines of {record['log']} ---\n{tail or '(empty)'}")
