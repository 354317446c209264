"""Preflight's cross-node transfer on SGLang's own stack: SGLang's KV managers, senders, receivers and bootstrap
server, run with the nodes' SGLang, move one request at the topology's shapes from a prefill node to a decode
node (VRAM on GPU nodes: that also catches GPU memory the transfer library cannot register).

Which stack a pair of preflight's transfer plan runs (`choose`, called per pair by pdctl.preflight.runner):
SGLang's where the deployment runs SGLang's code (SGLang servers, or the reference engine on a stack whose
registry entry is SGLang's code: `transfer.stack: sglang`) and both nodes' interpreter for it has SGLang and the
backend's library; otherwise pdctl's own transfer (one agent per node, pdctl.preflight.transfer), and the report
says which ran and why. The interpreters are the ones the deployment's servers run with.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pdctl.executors import node_executor
from pdctl.preflight.report import TransferResult
from pdctl.preflight.transfer import agent_env, bytes_path, expected_gbps
from pdctl.sglang_stack.launcher import probe
from pdctl.sglang_stack.rehearsal import Rehearsal
from pdctl.sglang_stack.sides import device_for, side_specs
from pdctl.transfer.registry import stack

if TYPE_CHECKING:
    from pdctl.preflight.context import Context
    from pdctl.render.spec import Deployment

TIMEOUT_S = 120.0


@dataclass(frozen=True)
class StackChoice:
    """Which transfer code the pair's test runs, the interpreter per node, and why."""

    stack: str  # "sglang" | "pdctl"
    pythons: dict[str, str]
    why: str


def worker_python(deployment: Deployment, role: str, node: str) -> str:
    """The interpreter DEPLOYMENT runs ROLE's server on NODE with (the one that will run SGLang's stack there):
    engine.python for SGLang, SGLang's interpreter for the reference engine on `transfer.stack: sglang`."""
    for worker in deployment.workers:
        if worker.role == role and worker.node == node:
            return worker.argv[0]
    return deployment.pythons[node]


def choose(ctx: Context, deployment: Deployment, source: str, target: str) -> StackChoice:
    """SGLang's stack where the deployment runs SGLang's code and both nodes can run it; else pdctl's."""
    topo = deployment.topo
    if topo.engine.kind != "sglang" and not stack(topo.transfer.stack).sglang_code:
        return StackChoice("pdctl", {}, "the reference engine runs pdctl's own transfer (transfer.stack: pdctl)")
    pythons = {source: worker_python(deployment, "prefill", source), target: worker_python(deployment, "decode", target)}
    missing = []
    for node, python in pythons.items():
        if python == deployment.pythons[node]:  # the interpreter the node probe ran
            pkgs = ctx.fact(node, "packages") or {}
            have = pkgs.get("sglang") and pkgs.get(topo.transfer.backend)
        else:  # this machine's SGLang interpreter (the reference engine on transfer.stack: sglang)
            got = probe(python)
            have = not isinstance(got, str) and got.has_backend(topo.transfer.backend)
        if not have:
            missing.append(f"{node} ({python})")
    if missing:
        return StackChoice("pdctl", pythons, "SGLang or its " + topo.transfer.backend + " library is not importable "
                           "on " + ", ".join(missing) + ": pdctl's own transfer ran instead")
    return StackChoice("sglang", pythons, "SGLang's own transfer stack, with the nodes' SGLang")


def run_pair_sglang(ctx: Context, deployment: Deployment, source: str, target: str, choice: StackChoice, *,
                    tokens: int) -> TransferResult:
    """The transfer test for one (prefill node, decode node) pair on SGLang's stack, with the environment the
    deployment gives its prefill servers' transfer path."""
    topo = deployment.topo
    src, dst = topo.node(source), topo.node(target)
    base = TransferResult(source, target, topo.transfer.backend, "unknown", None, 0.0, 0.0, False,
                          details={"stack": "sglang", "why": choice.why})
    pre, dec = side_specs(topo, tokens=tokens, prefill_host=src.address, decode_host=dst.address, timeout=TIMEOUT_S)
    env = agent_env(deployment, source)  # the prefill node's servers' env, its role's env included (issue 27)

    def popen(node: Any) -> Any:
        executor = node_executor(node, kind=deployment.executor, topo=topo)
        return lambda argv, env: executor.popen(argv, env=env)

    try:
        rehearsal = Rehearsal(choice.pythons[source], prefill_host=src.address, decode_host=dst.address,
                              timeout=TIMEOUT_S, env=env, popen={"prefill": popen(src), "decode": popen(dst)},
                              pythons={"prefill": choice.pythons[source], "decode": choice.pythons[target]})
    except RuntimeError as exc:
        return replace(base, error=f"SGLang's stack did not start: {exc}")
    try:
        if device_for(topo, rehearsal) == "cuda":
            pre, dec = replace(pre, device="cuda"), replace(dec, device="cuda")
        outcome = rehearsal.run(pre, dec)
        log = rehearsal.prefill.stderr_text()
    finally:
        rehearsal.close()
    carried, crosses = bytes_path(ctx, topo, source, target, log)
    seconds = float(outcome.get("seconds") or 0.0)
    nbytes, descs = int(outcome.get("bytes") or 0), int(outcome.get("descriptors") or 0)
    return replace(
        base, transport=carried, crosses_nodes=crosses, verified=bool(outcome["verified"]),
        gbps=nbytes / seconds / 1e9 if seconds > 0 and outcome["verified"] else 0.0,
        us_per_descriptor=seconds / max(1, descs) * 1e6, descriptors=descs, bytes=nbytes,
        expected_gbps=expected_gbps(ctx, source, target, deployment.nvlink),
        error=None if outcome["verified"] else f"SGLang's stack failed at {outcome['stage']}: {outcome['error']}",
        details=base.details | {"tokens": tokens, "sglang_version": rehearsal.sglang, "stage": outcome["stage"],
                                "memory": "VRAM" if pre.device == "cuda" else "DRAM",
                                "guards_bypassed": outcome.get("bypasses", [])},
    )
