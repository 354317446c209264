"""The cross-node transfer test: bench-transfer between the pairs of the transfer plan (pdctl.preflight.pairs),
for real.

One transfer agent (`pdctl.bench.transfer.agent`) runs on every node of the plan, started once through the
node's executor with the engine's Python; it plays bench-transfer's prefill side (on a prefill node) or decode
side (`pdctl.bench.transfer.peer`, on a decode node) of every pair it is in. This process only relays their
protocol lines, so the KV itself flows between the two nodes over the topology's backend, with the head-slice
shapes of the planned request, in DRAM (this build has no CUDA path).
Every byte is verified on the decode side. The prefill side's log says which path the bytes took: UCX's
protocol table for NIXL (UCX_PROTO_INFO), Mooncake's transport lines plus the kernel's route for Mooncake.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from typing import TYPE_CHECKING, Any

from pdctl.executors import node_executor
from pdctl.plan.request import config_from_topology
from pdctl.preflight.pairs import CROSS_NODE, NVLINK, SAME_HOST
from pdctl.preflight.parsers.ib_sysfs import parse_ib_sysfs
from pdctl.preflight.parsers.iproute import parse_ip_route_get
from pdctl.preflight.parsers.mooncake_log import parse_mooncake_log
from pdctl.preflight.parsers.ucx_proto import write_path
from pdctl.preflight.report import TransferResult
from pdctl.preflight.wire import BEGIN, END, READY, RESULT, TO_PEER
from pdctl.topology.placement import machine_key
from pdctl.transfer.registry import backend

if TYPE_CHECKING:
    from pdctl.preflight.context import Context
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology

AGENT_MODULE = "pdctl.bench.transfer.agent"
BENCH_TIMEOUT_S = 120.0
# A measured rate under this share of the link's nominal rate means the bytes did not take that link.
MIN_SHARE_OF_LINK = 0.1
NVLINK_GBPS = 100.0  # a conservative per-pair floor for multi-node NVLink (GB200/GB300 NVL72: ~900 GB/s per GPU)


def role_nodes(deployment: Deployment) -> tuple[list[str], list[str]]:
    """(prefill nodes, decode nodes): every node a prefill (decode) replica has a slot on, in placement order
    (a multi-node replica's other nodes move their ranks' KV too)."""
    placements = deployment.placements
    prefill = list(dict.fromkeys(s.node for p in placements if p.role == "prefill" for s in p.slots))
    decode = list(dict.fromkeys(s.node for p in placements if p.role == "decode" for s in p.slots))
    return prefill, decode


def link_class(topo: Topology, domains: dict[str, str | None]) -> Callable[[str, str], str]:
    """(prefill node, decode node) -> its link class: one machine (equal hosts), one multi-node NVLink domain
    (DOMAINS: node -> its domain from the probe, None when it has none), or across nodes."""

    def link(source: str, target: str) -> str:
        if source == target or machine_key(topo.node(source)) == machine_key(topo.node(target)):
            return SAME_HOST
        if domains.get(source) is not None and domains.get(source) == domains.get(target):
            return NVLINK
        return CROSS_NODE

    return link


class Agent:
    """Preflight's transfer agent on one node (pdctl.bench.transfer.agent), started once through the node's
    executor; its protocol lines go to ROUTE, its pairs' results to RESULTS, and its stderr is kept per pair
    (between the agent's markers: the path each pair's bytes took) and as a tail (why it failed)."""

    def __init__(self, node: str, proc: subprocess.Popen[str], route: Callable[[str, dict[str, Any]], None],
                 on_gone: Callable[[str], None]) -> None:
        self.node, self.proc, self.route, self.on_gone = node, proc, route, on_gone
        self.results: dict[str, queue.Queue[dict[str, Any] | None]] = {}
        self.logs: dict[str, list[str]] = {}
        self.ended: dict[str, threading.Event] = {}
        self.tail: list[str] = []
        self.ready: dict[str, Any] | None = None
        self.gone = threading.Event()
        self._lock = threading.Lock()
        self._stdin = threading.Lock()  # relays from other agents' threads and this process's commands
        self.threads = [threading.Thread(target=self._stdout, daemon=True),
                        threading.Thread(target=self._stderr, daemon=True)]
        for thread in self.threads:
            thread.start()

    def expect(self, pair: str) -> None:
        """Pair PAIR's result and log will come from this agent (call before sending it the pair)."""
        with self._lock:
            self.results[pair] = queue.Queue()
            self.ended[pair] = threading.Event()
            if self.gone.is_set():  # it died before this pair: no result will come
                self.results[pair].put(None)
                self.ended[pair].set()

    def send(self, doc: dict[str, Any]) -> None:
        try:
            assert self.proc.stdin is not None
            with self._stdin:
                self.proc.stdin.write(json.dumps(doc) + "\n")
                self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # the agent is gone: its pairs' results (or their absence) say why

    def _stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                self._line(line)
            except (ValueError, KeyError, TypeError):  # not the protocol: some library's own output
                self._keep(line)
        with self._lock:
            self.gone.set()
            for box in self.results.values():
                box.put(None)
        self.on_gone(self.node)

    def _line(self, line: str) -> None:
        if line.startswith(TO_PEER):
            doc = json.loads(line[len(TO_PEER):])
            self.route(str(doc["pair"]), doc)
        elif line.startswith(RESULT):
            doc = json.loads(line[len(RESULT):])
            if str(doc["pair"]) in self.results:
                self.results[str(doc["pair"])].put(doc["result"])
        elif line.startswith(READY):
            self.ready = json.loads(line[len(READY):])
        else:
            self._keep(line)

    def _stderr(self) -> None:
        assert self.proc.stderr is not None
        current: str | None = None
        for line in self.proc.stderr:
            if line.startswith(BEGIN):
                current = line[len(BEGIN):].strip()
                self.logs[current] = []
            elif line.startswith(END):
                self.ended.get(line[len(END):].strip(), threading.Event()).set()
                current = None
            elif current is not None:
                self.logs[current].append(line)
            else:
                self._keep(line)
        for event in list(self.ended.values()):
            event.set()

    def _keep(self, line: str) -> None:
        self.tail = [*self.tail[-40:], line]

    def result(self, pair: str, timeout: float) -> dict[str, Any] | None:
        """Pair PAIR's result document (None: no result within TIMEOUT, or the agent ended)."""
        try:
            doc = self.results[pair].get(timeout=max(0.0, timeout))
        except queue.Empty:
            return None
        self.ended[pair].wait(timeout=10)  # its last stderr lines (the path) arrive on the other pipe
        return doc

    def text(self, pair: str | None = None) -> str:
        return "".join(self.logs.get(pair, []) if pair is not None else self.tail)

    def close(self) -> None:
        """EOF to the agent, then wait for it (killed after a grace period)."""
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for thread in self.threads:
            thread.join(timeout=5)


def bench_config(topo: Topology, tokens: int, source: str, target: str) -> Any:
    """bench-transfer's config for TOPO's planned request, one round, the two nodes' addresses."""
    cfg = config_from_topology(topo, backend=None, tokens=tokens, repeats=1)
    return replace(cfg, prefill_host=topo.node(source).address, decode_host=topo.node(target).address,
                   timeout=BENCH_TIMEOUT_S)


def agent_env(deployment: Deployment, node: str) -> dict[str, str]:
    """The environment the deployment gives the transfer path of NODE's servers (UCX's transports for tcp, NVLink
    decided), with the role's env (engine.env, prefill.env / decode.env over it) winning, as in the servers'
    commands; a node with both roles gets prefill's over decode's; the backend's path reporting last: the test
    must learn the path even if the user's env silences it."""
    topo = deployment.topo
    prefill, decode = role_nodes(deployment)
    roles = [role for role, nodes in (("decode", decode), ("prefill", prefill)) if node in nodes]
    env: dict[str, str] = {}
    for role in roles or ["prefill"]:  # a node with both roles: prefill's env over decode's
        env |= {**deployment.transfer_env.get(role, {}), **topo.env_of(role)}
    return env | backend(topo.transfer.backend).path_env


class Transfers:
    """One agent per node of a transfer plan, started once; `run_round` moves a round's pairs in parallel."""

    def __init__(self, ctx: Context, deployment: Deployment, nodes: list[str], *, tokens: int) -> None:
        self.ctx, self.deployment, self.tokens = ctx, deployment, tokens
        topo = deployment.topo
        self.pairs: dict[str, tuple[str, str]] = {}
        self.agents: dict[str, Agent] = {}
        for node in nodes:
            proc = node_executor(topo.node(node), kind=deployment.executor, topo=topo).popen(
                [deployment.pythons[node], "-m", AGENT_MODULE, topo.transfer.backend], env=agent_env(deployment, node))
            self.agents[node] = Agent(node, proc, self._route, self._gone)

    def _gone(self, node: str) -> None:
        """NODE's agent ended: the prefill sides waiting on its decode sides learn it now, not at their timeout."""
        for pair, (source, target) in list(self.pairs.items()):
            if target == node and source != node:
                self.agents[source].send({"cmd": "relay", "pair": pair, "to": "prefill", "msg": None})

    def _route(self, pair: str, doc: dict[str, Any]) -> None:
        source, target = self.pairs[pair]
        to = doc.get("to")
        self.agents[source if to == "prefill" else target].send(
            {"cmd": "relay", "pair": pair, "to": to, "msg": doc.get("msg")})

    def start(self, pair: str, source: str, target: str) -> None:
        """Pair PAIR (SOURCE's prefill side, TARGET's decode side) started on the two agents."""
        self.pairs[pair] = (source, target)
        self.agents[source].expect(pair)
        self.agents[target].send({"cmd": "decode", "pair": pair})
        cfg = bench_config(self.deployment.topo, self.tokens, source, target)
        self.agents[source].send({"cmd": "prefill", "pair": pair, "config": asdict(cfg)})
        if self.agents[target].gone.is_set() and source != target:
            self._gone(target)

    def finish(self, pair: str, timeout: float) -> TransferResult | None:
        """Pair PAIR's result, waited for up to TIMEOUT (None: still running)."""
        source, target = self.pairs[pair]
        doc = self.agents[source].result(pair, timeout)
        if doc is None and not self.agents[source].gone.is_set():
            return None
        return self._result(pair, source, target, doc)

    def _result(self, pair: str, source: str, target: str, doc: dict[str, Any] | None) -> TransferResult:
        ctx, topo, tokens = self.ctx, self.deployment.topo, self.tokens
        python = self.deployment.pythons
        base = TransferResult(source, target, topo.transfer.backend, "unknown", None, 0.0, 0.0, False)
        driver, peer = self.agents[source], self.agents[target]
        if doc is None or "error" in doc:
            why = (doc or {}).get("error") or f"the transfer agent on {source} ended without a result"
            logs = {"driver": driver.text(pair) + driver.text(), "peer": peer.text()}
            if "No module named 'pdctl'" in logs["driver"] + logs["peer"]:
                why = (f"pdctl is not importable by {python[source]} on the nodes: the transfer test runs "
                       "bench-transfer there (install pdctl in the engine's environment, or --skip-transfer)")
            tails = "; ".join(f"{k}: {v.strip()[-400:]}" for k, v in logs.items() if v.strip())
            return replace(base, error=f"{why}" + (f" ({tails})" if tails else ""))
        token = doc["paths"]["per_token"]
        transport, crosses = bytes_path(ctx, topo, source, target, driver.text(pair))
        return replace(
            base,
            transport=transport,
            crosses_nodes=crosses,
            gbps=float(token["gbps"]),
            us_per_descriptor=float(token["seconds"]) / max(1, int(token["descriptors"])) * 1e6,
            verified=bool(doc["ok"]),
            descriptors=int(token["descriptors"]),
            bytes=int(token["bytes"]),
            expected_gbps=expected_gbps(ctx, source, target, self.deployment.nvlink),
            error=None if doc["ok"] else f"{token['mismatched_bytes']} bytes arrived wrong",
            details={"tokens": tokens, "packed_gbps": doc["paths"]["packed"]["gbps"],
                     "memcpy_gbps": doc["memcpy_gbps"], "rank_pairs": doc["rank_pairs"], "kind": token["kind"],
                     "agent_pids": [driver.ready and driver.ready.get("pid"), peer.ready and peer.ready.get("pid")]},
        )

    def agents_json(self) -> dict[str, Any]:
        """node -> what its agent said at start (pid, hostname), or null when it never got ready."""
        return {node: agent.ready for node, agent in self.agents.items()}

    def close(self) -> None:
        with ThreadPoolExecutor(max_workers=max(1, min(32, len(self.agents)))) as pool:
            list(pool.map(Agent.close, self.agents.values()))


def bytes_path(ctx: Context, topo: Topology, source: str, target: str, log: str) -> tuple[str, bool | None]:
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
