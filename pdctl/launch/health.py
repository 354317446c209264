"""HTTP health probes of workers (GET /health) and of the router (GET /readiness, GET /workers).

sglang_router 0.3.2 answers /readiness with 200 only once it has healthy workers ("insufficient healthy
workers" 503 before); /workers lists the workers it registered, so launch can wait for all of them.
"""

from __future__ import annotations

from typing import Any

import requests

from pdctl.clip import clip

PROBE_TIMEOUT_S = 3.0


def probe(url: str, *, timeout: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """(ok, what) for GET URL: ok iff HTTP 200; `what` says why not, for progress views and errors."""
    try:
        response = requests.get(url, timeout=timeout)
    except requests.RequestException as exc:
        reason = type(exc).__name__
        if isinstance(exc, requests.ConnectionError):
            reason = "connection refused"
        return False, reason
    if response.status_code == 200:
        return True, "HTTP 200"
    return False, f"HTTP {response.status_code} {clip(response.text, 160)}"


def router_workers(router_url: str, *, timeout: float = PROBE_TIMEOUT_S) -> list[dict[str, Any]] | None:
    """The workers the router knows (GET /workers), or None if it does not answer."""
    try:
        response = requests.get(router_url.rstrip("/") + "/workers", timeout=timeout)
        if response.status_code != 200:
            return None
        doc = response.json()
    except (requests.RequestException, ValueError):
        return None
    workers = doc.get("workers") if isinstance(doc, dict) else doc
    return workers if isinstance(workers, list) else None


def worker_is_healthy(worker: dict[str, Any]) -> bool:
    """A /workers entry counts as healthy unless it says otherwise (field names vary across versions)."""
    for key in ("is_healthy", "healthy"):
        if key in worker:
            return bool(worker[key])
    status = worker.get("status") or worker.get("health")
    if isinstance(status, str):
        return status.lower() in {"healthy", "ready", "ok", "up"}
    return True


def worker_health(record: dict[str, Any], *, timeout: float = PROBE_TIMEOUT_S) -> tuple[bool, str]:
    """(ok, what) of a running worker record: GET url + health_path; a node rank > 0 of a multi-node
    replica serves no HTTP and counts as healthy while it runs (callers check that it runs)."""
    if record.get("url") and record.get("health_path"):
        return probe(record["url"] + record["health_path"], timeout=timeout)
    return True, "running"


def router_check(router_url: str, expected_workers: int) -> tuple[bool, str, list[dict[str, Any]] | None]:
    """(ok, what, workers): /readiness answers 200 and /workers lists EXPECTED_WORKERS healthy workers;
    `workers` is the /workers list (None if unknown), so `pdctl status` shows it without asking twice."""
    ok, what = probe(router_url.rstrip("/") + "/readiness")
    if not ok:
        return False, f"/readiness: {what}", None
    workers = router_workers(router_url)
    if workers is None:
        return True, "ready", None
    healthy = sum(1 for w in workers if worker_is_healthy(w))
    return healthy >= expected_workers, f"{healthy}/{expected_workers} workers healthy", workers


def router_ready(router_url: str, expected_workers: int) -> tuple[bool, str]:
    """(ok, what) of router_check: what launch waits for."""
    ok, what, _ = router_check(router_url, expected_workers)
    return ok, what
