"""Gather facts from every node of a topology: the probe (pdctl.preflight.probe) run with the engine's
Python through the node's executor, all nodes in parallel, each with its own timeout.

A node that cannot be reached, has no such interpreter, or does not answer in time is a fact too (the
`reach` check reports it); it never stalls the others.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl.executors import Executor, node_executor
from pdctl.preflight import probe
from pdctl.preflight.parsers.arch import ARCH_WRAPPER, Arch, parse_arch
from pdctl.topology.placement import port_bindings
from pdctl.transfer.registry import BACKENDS, backend

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment
    from pdctl.topology import Node

PROBE_SOURCE = Path(probe.__file__).read_text(encoding="utf-8")


@dataclass
class NodeFacts:
    """What the probe returned for one node, or why it returned nothing."""

    node: str
    executor: str
    python: str
    seconds: float
    facts: dict[str, Any] = field(default_factory=dict)
    error: str | None = None
    error_kind: str | None = None  # unreachable | python | arch | timeout | probe
    arch: Arch | None = None  # the node's uname -m and the interpreter's architecture (when the wrapper ran)

    @property
    def ok(self) -> bool:
        return self.error is None


def node_roles(deployment: Deployment) -> dict[str, list[str]]:
    """Node -> the roles it runs (prefill / decode / colocated / router), in placement order."""
    topo = deployment.topo
    out: dict[str, list[str]] = {n.name: [] for n in topo.nodes}
    for placement in deployment.placements:
        for slot in placement.slots:
            if placement.role not in out[slot.node]:
                out[slot.node].append(placement.role)
    out[topo.router_node.name].append("router")
    return out


def _looks_like_path(path: str) -> bool:
    return path.startswith((".", "/", "~")) or Path(path).expanduser().is_dir()


def probe_args(deployment: Deployment, node: Node, roles: list[str], peers: list[str],
               read: list[str] | None = None, dirs: list[str] | None = None) -> dict[str, Any]:
    """What to look at on NODE: its ports, the model (if it runs a server role), peers to resolve and route,
    the files READ and directories DIRS (what a Slurm job's nodes must share with the launching machine)."""
    topo = deployment.topo
    workers = [r for r in roles if r != "router"]
    args: dict[str, Any] = {
        "read_files": list(read or []),
        "dirs": list(dirs or []),
        "resolve": sorted({node.address, *peers}),
        "routes": sorted(set(peers) - {node.address}),
        "ports": [],
        "gpu": node.gpu != "cpu" or topo.engine.kind == "sglang",
        "ucx": topo.is_pd and backend(topo.transfer.backend).ucx and bool(workers),
        "packages": {b.name: list(b.distributions) for b in BACKENDS.values()},
        "disk": [],
    }
    for name, port, what in port_bindings(topo, deployment.placements):
        if name == node.name:
            host = topo.router.host if what in ("router", "router metrics") else node.address
            args["ports"].append([host, port])
    if workers:
        path = deployment.model_path
        if _looks_like_path(path):
            args["model"] = path
            args["disk"].append(path)
        else:
            args["model_repo"] = path
            args["revision"] = topo.model.revision
    return args


def peers_of(deployment: Deployment, roles: dict[str, list[str]]) -> dict[str, list[str]]:
    """Node -> the advertised addresses it must reach: decode and prefill reach each other (bootstrap, KV
    transfer, notifications), the router reaches every server."""
    topo = deployment.topo
    by_role: dict[str, set[str]] = {}
    for name, rs in roles.items():
        for role in rs:
            by_role.setdefault(role, set()).add(topo.node(name).address)
    out: dict[str, set[str]] = {name: set() for name in roles}
    for name, rs in roles.items():
        if "prefill" in rs:
            out[name] |= by_role.get("decode", set())
        if "decode" in rs:
            out[name] |= by_role.get("prefill", set())
        if "router" in rs:
            for role in ("prefill", "decode", "colocated"):
                out[name] |= by_role.get(role, set())
    return {name: sorted(addrs) for name, addrs in out.items()}


def run_probe(executor: Executor, python: str, args: dict[str, Any],
              timeout: float) -> tuple[dict, str | None, str | None, Arch | None]:
    """(facts, error, error_kind, arch) of one probe run: a shell wrapper says the node's `uname -m` and the
    interpreter binary's architecture (pdctl.preflight.parsers.arch), then runs the probe with it."""
    done = executor.run(["sh", "-c", ARCH_WRAPPER, "pdctl-probe", python, "-c", PROBE_SOURCE, json.dumps(args)],
                        timeout=timeout)
    arch = parse_arch(done.stdout)
    for line in done.stdout.splitlines():
        if line.startswith(probe.MARKER):
            return json.loads(line[len(probe.MARKER):]), None, None, arch
    facts, error, kind = _why(executor, python, done, timeout)
    if arch is not None and arch.mismatch and kind != "unreachable":
        return {}, (f"engine python {python!r} is an {arch.binary} executable but the node is {arch.machine}: "
                    f"it cannot run there ({error})"), "arch", arch
    return facts, error, kind, arch


def _why(executor: Executor, python: str, done: Any, timeout: float) -> tuple[dict, str, str]:
    tail = (done.stderr or done.stdout).strip()[-600:]
    if done.returncode is None:
        return {}, f"no answer within {timeout:g}s", "timeout"
    if executor.unreachable(done):
        return {}, f"ssh failed: {tail}", "unreachable"
    if done.returncode == 127 or "No such file" in tail or "not found" in tail:
        return {}, f"engine python {python!r} not found on the node ({tail})", "python"
    return {}, f"the probe failed with exit {done.returncode}: {tail}", "probe"


def gather(deployment: Deployment, *, timeout: float = 60.0, read: list[str] | None = None,
           dirs: list[str] | None = None, until: float | None = None,
           on_node: Callable[[NodeFacts], None] | None = None) -> dict[str, NodeFacts]:
    """Probe every node in parallel, each through the executor the deployment's kind reaches it with, with the
    interpreter its servers run with (each also reads the files READ, looks for the directories DIRS), TIMEOUT
    seconds each and none past UNTIL (time.monotonic(): the whole preflight's deadline); ON_NODE hears of each
    node as it answers; node -> NodeFacts (in topology order)."""
    topo = deployment.topo
    roles = node_roles(deployment)
    peers = peers_of(deployment, roles)

    def one(node: Node) -> NodeFacts:
        executor = node_executor(node, kind=deployment.executor, topo=topo)
        python = deployment.pythons[node.name]
        started = time.monotonic()
        limit = timeout if until is None else max(1.0, min(timeout, until - started))
        facts, error, kind, arch = run_probe(
            executor, python, probe_args(deployment, node, roles[node.name], peers[node.name], read, dirs), limit
        )
        return NodeFacts(node.name, executor.kind, python, time.monotonic() - started, facts, error, kind, arch)

    results: dict[str, NodeFacts] = {}
    with ThreadPoolExecutor(max_workers=min(32, len(topo.nodes))) as pool:
        for future in as_completed([pool.submit(one, node) for node in topo.nodes]):
            facts = future.result()
            results[facts.node] = facts
            if on_node is not None:
                on_node(facts)
    return {n.name: results[n.name] for n in topo.nodes}
