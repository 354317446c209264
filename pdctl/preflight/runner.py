"""run_preflight(deployment): gather facts from every node, run every family of checks, then the cross-node
transfer test; the PreflightReport is the verdict `pdctl preflight` prints and `pdctl launch` obeys.

Preflight reads the rendered deployment (pdctl.render): which nodes run which roles, the interpreter and model
path the servers are given, the ports they bind, the KV transfer path's environment. It renders and places
nothing itself, so it checks exactly what launch starts."""

from __future__ import annotations

import contextlib
import os
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl import __version__
from pdctl.errors import UserError
from pdctl.executors import shared_connections
from pdctl.models import resolve_model_spec
from pdctl.preflight.checks import FAMILIES
from pdctl.preflight.checks.gpu import inventory, node_domain, nvlink_domain
from pdctl.preflight.context import Context
from pdctl.preflight.gather import NodeFacts, gather, node_roles
from pdctl.preflight.pairs import plan_transfers
from pdctl.preflight.report import Check, NodeReport, PreflightReport, TransferResult, failed, passed
from pdctl.preflight.transfer import BENCH_TIMEOUT_S, MIN_SHARE_OF_LINK, Transfers, link_class, role_nodes
from pdctl.preflight.transfer_sglang import choose, run_pair_sglang
from pdctl.render.transfer import NVLINK_NOTE, with_nvlink

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology

Progress = Callable[[str], None]
DEFAULT_TOKENS = 1024
# The whole preflight's limit (`--deadline`; launch's preflight too): probes and every round of transfers.
DEFAULT_DEADLINE_S = 600.0
PAIR_WAIT_S = BENCH_TIMEOUT_S + 180  # one pair: its agents' start, setup, the bench's own timeout, verification
SHARED_TOKEN_FILE = ".pdctl-shared-check"


def _spec(topo: Topology) -> tuple[Any, str | None]:
    try:
        return resolve_model_spec(topo.model, engine_kind=topo.engine.kind), None
    except UserError as exc:
        return None, exc.message


def run_preflight(
    deployment: Deployment,
    *,
    skip_transfer: bool = False,
    tokens: int = DEFAULT_TOKENS,
    timeout: float = 60.0,
    progress: Progress | None = None,
    shared_dir: Path | None = None,
    transfers: str = "cover",
    deadline: float | None = DEFAULT_DEADLINE_S,
) -> PreflightReport:
    """Check every node of DEPLOYMENT through the executor its kind reaches it with (ssh / local / srun), in
    parallel with TIMEOUT per node, then (unless SKIP_TRANSFER) move a TOKENS-token request's KV between the
    pairs of the transfer plan (TRANSFERS: cover | all-pairs; pdctl.preflight.pairs), round by round, with the
    environment the deployment gives the transfer path. DEADLINE: seconds for all of it; what still runs then
    is named in the report, which fails. SHARED_DIR: a directory every node must share with this machine (a
    Slurm job's run dir): a token written there must read back the same on every node
    (pdctl.preflight.checks.shared). PROGRESS hears one line per node probed and per transfer finished."""
    clock = Clock(deadline, progress)
    topo = deployment.topo
    spec, spec_error = _spec(topo)
    clock.say(f"probing {len(topo.nodes)} node(s)")
    shared_dir = shared_dir if topo.engine.container is None else None  # the probe sees the image's files
    needed = job_dirs() if shared_dir is not None else {}
    probed: list[str] = []

    def on_node(facts: NodeFacts) -> None:
        probed.append(facts.node)
        state = "ok" if facts.ok else f"FAIL ({facts.error_kind})"
        clock.say(f"probed {facts.node}: {state} in {facts.seconds:.1f}s",
                  f"{len(probed)}/{len(topo.nodes)} nodes, {len(topo.nodes) - len(probed)} left")

    with shared_connections(), shared_token(shared_dir) as shared:
        facts = gather(deployment, timeout=timeout, read=list(shared), dirs=list(needed.values()), until=clock.until,
                       on_node=on_node)
        ctx = Context(deployment, spec, spec_error, facts, node_roles(deployment), __version__, shared_files=shared,
                      needed_dirs=needed)
        report = _checks(ctx, deployment)
        if clock.expired():
            report.expired += [f"probe of {n}" for n, f in facts.items() if f.error_kind == "timeout"]
        if topo.is_pd and not skip_transfer:
            _transfer_test(ctx, report, with_nvlink(deployment, report.nvlink_domain), transfers, tokens, clock)
        elif skip_transfer and topo.is_pd:
            report.notes.append("cross-node transfer test skipped (--skip-transfer)")
    report.deadline_s = deadline
    report.wall_s = clock.elapsed()
    return report


class Clock:
    """The whole preflight's deadline, and its progress lines (elapsed time, what is left)."""

    def __init__(self, deadline: float | None, progress: Progress | None) -> None:
        self.started = time.monotonic()
        self.until = None if deadline is None else self.started + deadline
        self.progress = progress

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def left(self, cap: float) -> float:
        """Seconds a wait may take: CAP, or less when the deadline is nearer."""
        return cap if self.until is None else max(0.0, min(cap, self.until - time.monotonic()))

    def expired(self) -> bool:
        return self.until is not None and time.monotonic() >= self.until

    def say(self, what: str, counts: str = "") -> None:
        if self.progress is not None:
            self.progress(f"[{self.elapsed():.1f}s] {what}" + (f" ({counts})" if counts else ""))


def _checks(ctx: Context, deployment: Deployment) -> PreflightReport:
    """Every family's checks over the gathered facts; the NVLink finding adjusts the transfer environment."""
    topo = ctx.topo
    by_node: dict[str, list[Check]] = {n.name: [] for n in topo.nodes}
    for family in FAMILIES:
        for node, check in family.run(ctx):
            by_node[node].append(check)
    shared = nvlink_domain(ctx)
    adjusted = with_nvlink(deployment, shared)  # transfer.nvlink: auto, decided by what the nodes said
    return PreflightReport(
        topology=topo.name,
        nodes=[NodeReport(n.name, n.host, ctx.roles[n.name], by_node[n.name], _summary(ctx, n.name))
               for n in topo.nodes],
        nvlink_domain=shared,
        notes=[n for n in adjusted.notes if n.startswith(NVLINK_NOTE)],
    )


def _transfer_test(ctx: Context, report: PreflightReport, deployment: Deployment, mode: str, tokens: int,
                   clock: Clock) -> None:
    """The plan's rounds, one after another, each round's pairs in parallel, on one agent per node; then
    every prefill and decode node must be in a verified transfer (else `transfer.coverage` fails on it)."""
    topo = ctx.topo
    prefill, decode = role_nodes(deployment)
    reached = [n for n in dict.fromkeys(prefill + decode) if ctx.reached(n)]
    domains = {n: node_domain(ctx, n) for n in reached}
    plan = plan_transfers([n for n in prefill if n in reached], [n for n in decode if n in reached], mode=mode,
                          link=link_class(topo, domains))
    report.transfer_plan = plan.to_json()
    clock.say(f"transfer plan ({mode}): {len(plan.pairs)} pair(s) in {len(plan.rounds)} round(s) over "
              f"{len(plan.nodes())} node(s), {topo.transfer.backend}, {tokens} tokens")
    done = 0
    # whose transfer code each pair runs (pdctl.preflight.transfer_sglang.choose): SGLang's stack where the
    # deployment runs SGLang's code and both nodes can, else pdctl's own on one agent per node
    choices = {pair: choose(ctx, deployment, *pair) for pair in plan.pairs}
    on_agents = {n for pair, c in choices.items() if c.stack == "pdctl" for n in pair}
    if plan.pairs:
        agents = Transfers(ctx, deployment, sorted(on_agents, key=reached.index), tokens=tokens)

        def finish(key: str, pair: tuple[str, str]) -> TransferResult | None:
            choice = choices[pair]
            if choice.stack == "sglang":
                return run_pair_sglang(ctx, deployment, *pair, choice, tokens=tokens)
            result = agents.finish(key, clock.left(PAIR_WAIT_S))
            return None if result is None else replace(result, details={"stack": "pdctl", "why": choice.why}
                                                        | result.details)

        try:
            for number, pairs in enumerate(plan.rounds, 1):
                if clock.expired():
                    report.expired += [f"transfer {p} -> {d} (not started)" for r in plan.rounds[number - 1:]
                                       for p, d in r]
                    break
                base = plan.pairs.index(pairs[0])
                for i, (p, d) in enumerate(pairs):
                    if choices[(p, d)].stack == "pdctl":
                        agents.start(str(base + i), p, d)
                with ThreadPoolExecutor(max_workers=len(pairs)) as pool:
                    waits = {pool.submit(finish, str(base + i), pair): pair for i, pair in enumerate(pairs)}
                    for future in as_completed(waits):
                        p, d = waits[future]
                        result = future.result()
                        if result is None:
                            report.expired.append(f"transfer {p} -> {d} (running)")
                            continue
                        done += 1
                        report.transfers.append(result)
                        _node(report, p).checks.extend(transfer_checks(result, topo.node(p).address !=
                                                                       topo.node(d).address))
                        state = f"{result.gbps:.3f} GB/s verified" if result.ok else "FAIL"
                        clock.say(f"transfer {p} -> {d}: {state}", f"round {number}/{len(plan.rounds)}, "
                                  f"{done}/{len(plan.pairs)} pairs, {len(plan.pairs) - done} left")
                if report.expired:
                    report.expired += [f"transfer {p} -> {d} (not started)" for r in plan.rounds[number:]
                                       for p, d in r]
                    break
        finally:
            report.agents = agents.agents_json()
            agents.close()
    verified = {n for t in report.transfers if t.ok for n in (t.source, t.target)}
    for node in dict.fromkeys(prefill + decode):
        if node not in verified:
            why = "it was not reached" if not ctx.reached(node) else "its transfers failed or did not finish"
            _node(report, node).checks.append(failed(
                "transfer.coverage", f"{node} is in no verified KV transfer: {why}",
                fix="see the node's reach and transfer checks above; --transfers all-pairs to test every link"))


def job_dirs() -> dict[str, str]:
    """What -> directory every node of a Slurm launch must have: the working directory its steps start in,
    and the Python environment the job's pdctl (and its reference engine and router) run from."""
    return {"working directory": os.getcwd(), "Python environment running pdctl": sys.prefix}


@contextlib.contextmanager
def shared_token(directory: Path | None) -> Iterator[dict[str, str]]:
    """{path: token} of a token file written in DIRECTORY for the nodes to read back, removed afterwards
    ({} without a directory)."""
    if directory is None:
        yield {}
        return
    Path(directory).mkdir(parents=True, exist_ok=True)
    path = Path(directory).resolve() / SHARED_TOKEN_FILE
    token = uuid.uuid4().hex
    path.write_text(token + "\n", encoding="utf-8")
    try:
        yield {str(path): token}
    finally:
        path.unlink(missing_ok=True)


def _node(report: PreflightReport, name: str) -> NodeReport:
    return next(n for n in report.nodes if n.node == name)


def transfer_checks(result: TransferResult, two_machines: bool) -> list[Check]:
    """What a transfer result means: verified bytes, bytes that crossed machines, a rate the link explains."""
    pair = f"{result.source} -> {result.target}"
    if result.error or not result.verified:
        return [failed("transfer", f"{pair}: {result.error or 'bytes not verified'}",
                       fix="run `pdctl bench-transfer` on the nodes and check the backend's logs; --skip-transfer "
                           "to launch anyway")]
    out = [passed("transfer", f"{pair}: {result.gbps:.2f} GB/s, {result.us_per_descriptor:.1f} us/descriptor, "
                  f"{result.bytes / 1e6:.1f} MB verified over {result.transport}", result.gbps)]
    if two_machines and result.crosses_nodes is False:
        out.append(failed("transfer.path", f"{pair}: the bytes did not cross the network ({result.transport}): the "
                          "two nodes look like one machine to the transfer library", found=result.transport,
                          fix="give the nodes distinct addresses, or steer UCX (UCX_NET_DEVICES / UCX_TLS)"))
    if result.expected_gbps and result.gbps < MIN_SHARE_OF_LINK * result.expected_gbps:
        out.append(failed("transfer.rate", f"{pair}: {result.gbps:.2f} GB/s is under "
                          f"{MIN_SHARE_OF_LINK:.0%} of the link's ~{result.expected_gbps:.0f} GB/s: a silent "
                          "fallback (e.g. to TCP)?", found=result.gbps, expected=result.expected_gbps,
                          fix="check the path above; for NVLink: IMEX channels and MC_FORCE_MNNVL; for RDMA: "
                              "transfer.ib_device and the HCA ports"))
    return out


def _summary(ctx: Context, name: str) -> dict[str, Any]:
    """The facts a user wants in one row per node."""
    facts = ctx.facts[name]
    node = ctx.topo.node(name)
    out: dict[str, Any] = {"executor": facts.executor, "python": facts.python, "advertise": node.address,
                           "probe_s": round(facts.seconds, 2)}
    if not facts.ok:
        return out
    out["hostname"] = ctx.fact(name, "hostname")
    out["packages"] = ctx.fact(name, "packages")
    out["machine"] = facts.arch.machine if facts.arch is not None else ctx.fact(name, "python", "machine")
    inv, _ = inventory(ctx, name)
    if inv is not None and node.gpu != "cpu":
        out.update({"gpu_model": inv.gpus[0].name if inv.gpus else None, "gpu_count": len(inv.gpus),
                    "driver": inv.driver_version, "cuda": inv.cuda_version})
    out["gpu"] = "cpu" if node.gpu == "cpu" or inv is None else \
        f"{len(inv.gpus)} x {inv.gpus[0].name if inv.gpus else '?'} (driver {inv.driver_version})"
    return out
