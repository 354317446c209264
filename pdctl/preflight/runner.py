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
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl import __version__
from pdctl.errors import UserError
from pdctl.models import resolve_model_spec
from pdctl.preflight.checks import FAMILIES
from pdctl.preflight.checks.gpu import inventory, nvlink_domain
from pdctl.preflight.context import Context
from pdctl.preflight.gather import gather, node_roles
from pdctl.preflight.report import Check, NodeReport, PreflightReport, TransferResult, failed, passed
from pdctl.preflight.transfer import MIN_SHARE_OF_LINK, node_pairs, run_pair
from pdctl.render.transfer import NVLINK_NOTE, with_nvlink

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology

Progress = Callable[[str], None]
DEFAULT_TOKENS = 1024
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
) -> PreflightReport:
    """Check every node of DEPLOYMENT through the executor its kind reaches it with (ssh / local / srun), in
    parallel with TIMEOUT per node, then (unless SKIP_TRANSFER) move a TOKENS-token request's KV between each
    prefill and each decode node, with the environment the deployment gives the transfer path. SHARED_DIR: a
    directory every node must share with this machine (a Slurm job's run dir): a token written there must
    read back the same on every node (pdctl.preflight.checks.shared)."""
    say = progress or (lambda _msg: None)
    started = time.monotonic()
    topo = deployment.topo
    spec, spec_error = _spec(topo)
    say(f"probing {len(topo.nodes)} node(s)")
    shared_dir = shared_dir if topo.engine.container is None else None  # the probe sees the image's files
    needed = job_dirs() if shared_dir is not None else {}
    with shared_token(shared_dir) as shared:
        facts = gather(deployment, timeout=timeout, read=list(shared), dirs=list(needed.values()))
    ctx = Context(deployment, spec, spec_error, facts, node_roles(deployment), __version__, shared_files=shared,
                  needed_dirs=needed)
    by_node: dict[str, list[Check]] = {n.name: [] for n in topo.nodes}
    for family in FAMILIES:
        for node, check in family.run(ctx):
            by_node[node].append(check)
    shared = nvlink_domain(ctx)
    adjusted = with_nvlink(deployment, shared)  # transfer.nvlink: auto, decided by what the nodes said
    report = PreflightReport(
        topology=topo.name,
        nodes=[NodeReport(n.name, n.host, ctx.roles[n.name], by_node[n.name], _summary(ctx, n.name))
               for n in topo.nodes],
        nvlink_domain=shared,
        notes=[n for n in adjusted.notes if n.startswith(NVLINK_NOTE)],
    )
    if topo.is_pd and not skip_transfer:
        unreached = [n for n, f in facts.items() if not f.ok]
        for source, target in node_pairs(deployment):
            if source in unreached or target in unreached:
                report.notes.append(f"transfer {source} -> {target} not run: a node was not reached")
                continue
            say(f"transfer {source} -> {target} ({topo.transfer.backend}, {tokens} tokens)")
            result = run_pair(ctx, adjusted, source, target, tokens=tokens)
            report.transfers.append(result)
            _node(report, source).checks.extend(transfer_checks(result, topo.node(source).address !=
                                                                 topo.node(target).address))
    elif skip_transfer and topo.is_pd:
        report.notes.append("cross-node transfer test skipped (--skip-transfer)")
    report.wall_s = time.monotonic() - started
    return report


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
