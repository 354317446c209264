"""What to scrape in a run: each worker that serves HTTP (its URL + /metrics) and the router's Prometheus
port. The router's metrics URL is `router.metrics_url` in the run's state or plan when launch recorded
one; runs rendered before that carry only the router's argv, so `--prometheus-port` (and
`--prometheus-host`, default all interfaces) is read from it, the host being where clients reach the router.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdctl.topology.placement import host_for_url

_WILDCARD = {"", "0.0.0.0", "::"}


@dataclass(frozen=True)
class Target:
    """One Prometheus endpoint of a run: `kind` engine | router; `url` None with `why` when unknown."""

    name: str
    kind: str
    url: str | None
    why: str | None = None
    # router: the workers whose in-flight requests count (decode only in PD: each request is on a prefill
    # AND a decode worker at once); empty = all
    workers: tuple[str, ...] = ()


def worker_targets(records: list[dict[str, Any]]) -> list[Target]:
    """The HTTP-serving workers of a run (node rank 0 of each replica; other node ranks serve nothing)."""
    return [Target(r["name"], "engine", r["url"].rstrip("/") + "/metrics") for r in records if r.get("url")]


def router_target(state: dict[str, Any], deployment: dict[str, Any] | None) -> Target:
    """The router's metrics endpoint: recorded, else derived from its argv in the rendered deployment (plan.json)."""
    router, planned = state.get("router") or {}, (deployment or {}).get("router") or {}
    records = [r for r in state.get("processes", []) if r.get("url")]
    workers = tuple(r["url"] for r in records if r.get("role") == "decode") or tuple(r["url"] for r in records)
    url = router.get("metrics_url") or planned.get("metrics_url")
    if url:
        return Target("router", "router", str(url), workers=workers)
    argv = [str(a) for a in planned.get("argv") or router.get("argv") or []]
    port = _flag(argv, "--prometheus-port")
    if port is None or not port.isdigit():
        return Target("router", "router", None, "no --prometheus-port in the router's command (plan.json)")
    host = _flag(argv, "--prometheus-host") or "0.0.0.0"
    if host in _WILDCARD:
        host = router.get("advertise") or planned.get("advertise") or router.get("host") or "127.0.0.1"
    return Target("router", "router", f"http://{host_for_url(str(host))}:{port}/metrics", workers=workers)


def _flag(argv: list[str], flag: str) -> str | None:
    """The value after FLAG (or of FLAG=VALUE) in ARGV; the last one wins, as argparse does."""
    value = None
    for i, item in enumerate(argv):
        if item == flag and i + 1 < len(argv):
            value = argv[i + 1]
        elif item.startswith(flag + "="):
            value = item.split("=", 1)[1]
    return value
