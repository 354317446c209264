"""The router command: sglang_router (0.3.x) in PD mode in front of every prefill and decode replica, or in
regular mode (`--worker-urls`) in front of the servers of a colocated topology."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pdctl.render.spec import ProcessSpec, merge_flags, node_ssh
from pdctl.topology.placement import host_for_url

if TYPE_CHECKING:
    from pdctl.topology import Topology
    from pdctl.topology.placement import ReplicaPlacement

# A short grace period: `pdctl down` should not wait minutes for in-flight requests of a test deployment.
SHUTDOWN_GRACE_SECS = 5

# How fast the router notices a worker that stops answering and, above all, takes it back once it answers
# again (docs/troubleshooting.md). sglang-router 0.3.2's defaults -- a health check every 60 s, 3 successes to
# mark a worker healthy, a circuit that stays open 60 s and needs 3 successes to close, retry backoff up to
# 30 s -- kept a resumed decode unused for minutes (measured: docs/troubleshooting.md#recovery). These make it
# seconds; `router.args` replaces any of them.
RECOVERY_FLAGS: dict[str, int] = {
    "health-check-interval-secs": 2,
    "health-check-timeout-secs": 3,
    "health-failure-threshold": 2,
    "health-success-threshold": 1,
    "cb-timeout-duration-secs": 5,
    "cb-success-threshold": 1,
    "retry-max-backoff-ms": 2000,
}
_WILDCARD = {"0.0.0.0", "::", ""}


def router_address(topo: Topology) -> str:
    """The address clients reach the router at: its bind address, or its node's address for a wildcard."""
    host = topo.router.host
    return topo.router_node.address if host in _WILDCARD else host


def router_url(topo: Topology) -> str:
    """Where clients reach the router."""
    return f"http://{host_for_url(router_address(topo))}:{topo.router.port}"


def metrics_port(topo: Topology) -> int:
    """The router's Prometheus port: router.metrics_port (written, or derived from router.port by the loader:
    pdctl.topology.model.ROUTER_METRICS_OFFSET); a `prometheus-port` in router.args, which replaces the
    rendered flag, wins here too."""
    given = topo.router.args.get("prometheus-port")
    if isinstance(given, int) and not isinstance(given, bool) or isinstance(given, str) and given.isdigit():
        return int(given)
    return int(topo.router.metrics_port or 0)


def router_metrics_url(topo: Topology) -> str:
    """Where the router's Prometheus metrics are read (`router.metrics_url` in plan.json and state.json)."""
    return f"http://{host_for_url(router_address(topo))}:{metrics_port(topo)}/metrics"


def render_router(
    topo: Topology,
    placements: list[ReplicaPlacement],
    *,
    python: str,
    startup_timeout_s: int = 600,
) -> ProcessSpec:
    """`python -m sglang_router.launch_router --pd-disaggregation --prefill URL BOOTSTRAP ... --decode URL`,
    or `... --worker-urls URL ...` for a colocated topology.

    The router's own worker-startup timeout is set to launch's timeout, so a router started by pdctl gives
    up on a worker no earlier than pdctl does. PYTHON is its node's interpreter for pdctl's processes
    (pdctl.render.kinds.own_python: this machine's or a Slurm job's pdctl interpreter, else engine.python, as the
    node's servers)."""
    node = topo.router_node
    argv = [python, "-m", "sglang_router.launch_router"]
    if topo.is_pd:
        argv.append("--pd-disaggregation")
        for p in placements:
            if p.role == "prefill":
                argv += ["--prefill", p.url, str(p.bootstrap_port)]
        for p in placements:
            if p.role == "decode":
                argv += ["--decode", p.url]
    else:  # colocated: regular mode, load-balancing over plain servers
        argv += ["--worker-urls", *(p.url for p in placements)]
    argv += ["--host", topo.router.host, "--port", str(topo.router.port)]
    if topo.router.policy:
        argv += ["--policy", topo.router.policy]
    prom = metrics_port(topo)
    argv += [
        "--prometheus-port",
        str(prom),
        "--prometheus-host",
        topo.router.host,
        "--shutdown-grace-period-secs",
        str(SHUTDOWN_GRACE_SECS),
        "--worker-startup-timeout-secs",
        str(max(1, int(startup_timeout_s))),
    ]
    for flag, value in RECOVERY_FLAGS.items():
        argv += [f"--{flag}", str(value)]
    argv = merge_flags(argv, topo.router.args)
    return ProcessSpec(
        name="router",
        role="router",
        replica=0,
        node=node.name,
        host=node.target,
        node_rank=0,
        argv=argv,
        env=topo.env_of("router"),
        url=router_url(topo),
        health_path="/readiness",
        bind_host=topo.router.host,
        ports=[topo.router.port, prom],
        ssh=node_ssh(node),
        advertise=router_address(topo),
        metrics_url=router_metrics_url(topo),
    )
