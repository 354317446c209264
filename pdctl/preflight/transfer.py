"""The cross-node transfer test: bench-transfer between each prefill node and each decode node, for real.

The prefill side (`pdctl.bench.transfer.remote`) runs on the prefill node and the decode side
(`pdctl.bench.transfer.peer`) on the decode node, both started through the nodes' executors with the engine's
Python; this process only relays their protocol lines, so the KV itself flows between the two nodes over the
topology's backend, with the head-slice shapes of the planned request, in DRAM (this build has no CUDA path).
Every byte is verified on the decode side. The prefill side's log says which path the bytes took: UCX's
protocol table for NIXL (UCX_PROTO_INFO), Mooncake's transport lines plus the kernel's route for Mooncake.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from pdctl.executors import node_executor
from pdctl.plan.request import config_from_topology
from pdctl.preflight.parsers.ib_sysfs import parse_ib_sysfs
from pdctl.preflight.parsers.iproute import parse_ip_route_get
from pdctl.preflight.parsers.mooncake_log import parse_mooncake_log
from pdctl.preflight.parsers.ucx_proto import write_path
from pdctl.preflight.report import TransferResult
from pdctl.transfer.registry import backend

if TYPE_CHECKING:
    from pdctl.preflight.context import Context
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology

BENCH_TIMEOUT_S = 120.0
# A measured rate under this share of the link's nominal rate means the bytes did not take that link.
MIN_SHARE_OF_LINK = 0.1
NVLINK_GBPS = 100.0  # a conservative per-pair floor for multi-node NVLink (GB200/GB300 NVL72: ~900 GB/s per GPU)


def node_pairs(deployment: Deployment) -> list[tuple[str, str]]:
    """(prefill node, decode node) of every prefill replica's head node x decode replica's head node."""
    placements = deployment.placements
    prefill = list(dict.fromkeys(p.slots[0].node for p in placements if p.role == "prefill"))
    decode = list(dict.fromkeys(p.slots[0].node for p in placements if p.role == "decode"))
    return [(p, d) for p in prefill for d in decode]


class Relay:
    """Pumps the two bench processes' protocol lines into each other and keeps everything else they print."""

    def __init__(self, driver: subprocess.Popen[str], peer: subprocess.Popen[str]) -> None:
        self.driver, self.peer = driver, peer
        self.result: queue.Queue[dict[str, Any] | None] = queue.Queue()
        self.logs: dict[str, list[str]] = {"driver": [], "peer": []}
        self.threads = [
            threading.Thread(target=self._pump_driver, daemon=True),
            threading.Thread(target=self._pump_peer, daemon=True),
            threading.Thread(target=self._drain, args=(driver.stderr, "driver"), daemon=True),
            threading.Thread(target=self._drain, args=(peer.stderr, "peer"), daemon=True),
        ]
        for thread in self.threads:
            thread.start()

    def _write(self, proc: subprocess.Popen[str], line: str) -> None:
        try:
            assert proc.stdin is not None
            proc.stdin.write(line if line.endswith("\n") else line + "\n")
            proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # that side is gone; the result (or its absence) tells why

    def _pump_driver(self) -> None:
        assert self.driver.stdout is not None
        for line in self.driver.stdout:
            if line.startswith("@>"):
                self._write(self.peer, line[2:])
            elif line.startswith("@="):
                self.result.put(json.loads(line[2:]))
            else:
                self.logs["driver"].append(line)
        self.result.put(None)

    def _pump_peer(self) -> None:
        assert self.peer.stdout is not None
        for line in self.peer.stdout:
            if line.startswith("@@"):
                self._write(self.driver, line)
            else:
                self.logs["peer"].append(line)

    def _drain(self, stream: Any, key: str) -> None:
        for line in stream:
            self.logs[key].append(line)

    def wait(self, timeout: float) -> dict[str, Any] | None:
        try:
            return self.result.get(timeout=timeout)
        except queue.Empty:
            return None

    def close(self) -> None:
        for proc in (self.driver, self.peer):
            for pipe in (proc.stdin,):
                try:
                    if pipe is not None:
                        pipe.close()
                except OSError:
                    pass
        deadline = time.monotonic() + 15
        for proc in (self.driver, self.peer):
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for thread in self.threads:
            thread.join(timeout=5)

    def text(self, key: str) -> str:
        return "".join(self.logs[key])


def bench_config(topo: Topology, tokens: int, source: str, target: str) -> Any:
    """bench-transfer's config for TOPO's planned request, one round, the two nodes' addresses."""
    cfg = config_from_topology(topo, backend=None, tokens=tokens, repeats=1)
    return replace(cfg, prefill_host=topo.node(source).address, decode_host=topo.node(target).address,
                   timeout=BENCH_TIMEOUT_S)


def run_pair(ctx: Context, deployment: Deployment, source: str, target: str, *, tokens: int) -> TransferResult:
    """The transfer test for one (prefill node, decode node) pair, with the environment DEPLOYMENT gives its
    prefill servers' transfer path (UCX's transports for tcp, NVLink decided), on the interpreters its servers
    run with."""
    topo = deployment.topo
    nvlink = deployment.nvlink
    # each side's env (engine.env with prefill.env / decode.env over it) wins over its transfer path's
    # environment, as in the servers' commands; the backend's path reporting last: the test must learn the
    # path even if the user's env silences it
    env = {role: {**deployment.transfer_env.get(role, {}), **topo.env_of(role), **backend(topo.transfer.backend).path_env}
           for role in ("prefill", "decode")}
    cfg = bench_config(topo, tokens, source, target)
    src_node, dst_node = topo.node(source), topo.node(target)
    python = deployment.pythons
    base = TransferResult(source, target, topo.transfer.backend, "unknown", None, 0.0, 0.0, False)
    peer = node_executor(dst_node, kind=deployment.executor, topo=topo).popen(
        [python[target], "-m", "pdctl.bench.transfer.peer"], env=env["decode"])
    driver = node_executor(src_node, kind=deployment.executor, topo=topo).popen(
        [python[source], "-m", "pdctl.bench.transfer.remote"], env=env["prefill"])
    relay = Relay(driver, peer)
    try:
        relay._write(driver, json.dumps(asdict(cfg)))
        doc = relay.wait(cfg.timeout + 180)
    finally:
        relay.close()
    if doc is None or "error" in doc:
        why = (doc or {}).get("error") or "the prefill side ended without a result"
        if "No module named 'pdctl'" in relay.text("driver") + relay.text("peer"):
            why = (f"pdctl is not importable by {python[source]} on the nodes: the transfer test runs "
                   "bench-transfer there (install pdctl in the engine's environment, or --skip-transfer)")
        tails = "; ".join(f"{k}: {relay.text(k).strip()[-400:]}" for k in ("driver", "peer") if relay.text(k).strip())
        return replace(base, error=f"{why}" + (f" ({tails})" if tails else ""))
    token = doc["paths"]["per_token"]
    transport, crosses = _path(ctx, topo, source, target, relay.text("driver"))
    return replace(
        base,
        transport=transport,
        crosses_nodes=crosses,
        gbps=float(token["gbps"]),
        us_per_descriptor=float(token["seconds"]) / max(1, int(token["descriptors"])) * 1e6,
        verified=bool(doc["ok"]),
        descriptors=int(token["descriptors"]),
        bytes=int(token["bytes"]),
        expected_gbps=expected_gbps(ctx, source, target, nvlink),
        error=None if doc["ok"] else f"{token['mismatched_bytes']} bytes arrived wrong",
        details={"tokens": tokens, "packed_gbps": doc["paths"]["packed"]["gbps"], "memcpy_gbps": doc["memcpy_gbps"],
                 "rank_pairs": doc["rank_pairs"], "kind": token["kind"]},
    )


def _path(ctx: Context, topo: Topology, source: str, target: str, log: str) -> tuple[str, bool | None]:
    """(what carried the bytes, whether it crossed from one machine to another) from the prefill side's log,
    read the way the backend's registry entry says its log tells the path (PATH_READERS)."""
    return PATH_READERS[backend(topo.transfer.backend).path_log](ctx, topo, source, target, log)


def _ucx_path(ctx: Context, topo: Topology, source: str, target: str, log: str) -> tuple[str, bool | None]:
    """UCX's protocol tables (UCX_PROTO_INFO): the lanes the writes took."""
    same_address = topo.node(source).address == topo.node(target).address
    path = write_path(log)
    if path is None:
        return "unknown (UCX printed no protocol table)", None
    return path.describe(), path.crosses_nodes and not same_address and not any(
        lane.endswith("/lo") for lane in path.lanes)


def _mooncake_path(ctx: Context, topo: Topology, source: str, target: str, log: str) -> tuple[str, bool | None]:
    """Mooncake's transport lines, and the kernel's route from the source node to the target."""
    same_address = topo.node(source).address == topo.node(target).address
    setups = parse_mooncake_log(log)
    kind = setups[0].transport if setups and setups[0].transport else "unknown transport"
    route = parse_ip_route_get(((ctx.fact(source, "routes") or {}).get(topo.node(target).address) or {}).get("out", ""))
    via = f" via {route.device}" if route else ""
    crosses = None if route is None else (not route.loopback and not same_address)
    return f"mooncake {kind}{via}", crosses


# a backend's `path_log` (pdctl.transfer.registry) -> how its prefill log says which path the bytes took
PATH_READERS: dict[str, Callable[[Context, Topology, str, str, str], tuple[str, bool | None]]] = {
    "ucx": _ucx_path,
    "mooncake": _mooncake_path,
}


def expected_gbps(ctx: Context, source: str, target: str, nvlink: bool) -> float | None:
    """The nominal rate of the link the transfer should use (None when unknown, e.g. DRAM over TCP)."""
    if nvlink:
        return NVLINK_GBPS
    if ctx.topo.engine.kind == "reference" or ctx.topo.transfer.protocol != "rdma":
        return None

    rates = []
    for node in (source, target):
        devices = parse_ib_sysfs(ctx.fact(node, "ib_sysfs") or "")
        names = ctx.topo.node(node).ib_devices or list(devices)
        node_rates = [p.rate_gbps for n in names if n in devices for p in devices[n].ports.values()
                      if p.active and p.rate_gbps]
        if node_rates:
            rates.append(max(node_rates) / 8.0)  # Gb/s of one port -> GB/s
    return min(rates) if rates else None
