"""Preflight's cross-node transfer on SGLang's own stack: SGLang's KV managers, senders, receivers and bootstrap
server, run with the nodes' SGLang, move one request at the topology's shapes from a prefill node to a decode
node (VRAM on GPU nodes: that also catches GPU memory the transfer library cannot register).

Which stack runs (`choose`): SGLang's on `engine.kind: sglang` topologies (and on `transfer.stack: sglang`)
when both nodes' engine Python has SGLang and the backend's library; otherwise pdctl's own transfer
(pdctl.preflight.transfer), and the report says which ran and why.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from pdctl.launch.executors import node_executor
from pdctl.launch.render_transfer import transfer_env
from pdctl.preflight.report import TransferResult

if TYPE_CHECKING:
    from pdctl.preflight.context import Context

TIMEOUT_S = 120.0


@dataclass(frozen=True)
class StackChoice:
    """Which transfer code the pair's test runs, the interpreter per node, and why."""

    stack: str  # "sglang" | "pdctl"
    pythons: dict[str, str]
    why: str


def stack_python(topo: Any, node: Any) -> str:
    """The interpreter that will run SGLang's stack on NODE: the engine's (SGLang servers), or the one launch
    renders for the reference engine on `transfer.stack: sglang`."""
    from pdctl.preflight.gather import engine_python

    python = engine_python(topo, node)
    if topo.engine.kind == "reference":
        import sys

        from pdctl.transfer.sglang_stack.launcher import local_python

        if python == sys.executable:
            return local_python()
    return python


def choose(ctx: Context, source: str, target: str) -> StackChoice:
    """SGLang's stack where the topology runs SGLang's code and both nodes can run it; else pdctl's."""
    topo = ctx.topo
    if topo.engine.kind != "sglang" and topo.transfer.stack != "sglang":
        return StackChoice("pdctl", {}, "the reference engine runs pdctl's own transfer (transfer.stack: pdctl)")
    from pdctl.preflight.gather import engine_python

    pythons = {n: stack_python(topo, topo.node(n)) for n in (source, target)}
    missing = []
    for node, python in pythons.items():
        if python == engine_python(topo, topo.node(node)):  # the interpreter the node probe ran
            pkgs = ctx.fact(node, "packages") or {}
            have = pkgs.get("sglang") and pkgs.get(topo.transfer.backend)
        else:  # this machine's SGLang interpreter (the reference engine on transfer.stack: sglang)
            from pdctl.transfer.sglang_stack.launcher import probe

            got = probe(python)
            have = not isinstance(got, str) and got.has_backend(topo.transfer.backend)
        if not have:
            missing.append(f"{node} ({python})")
    if missing:
        return StackChoice("pdctl", pythons, "SGLang or its " + topo.transfer.backend + " library is not importable "
                           "on " + ", ".join(missing) + ": pdctl's own transfer ran instead")
    return StackChoice("sglang", pythons, "SGLang's own transfer stack, with the nodes' SGLang")


def run_pair_sglang(ctx: Context, source: str, target: str, choice: StackChoice, *, tokens: int, nvlink: bool,
                    slurm: bool = False) -> TransferResult:
    """The transfer test for one (prefill node, decode node) pair on SGLang's stack."""
    from pdctl.bench.transfer.sglang_run import device_for, side_specs, transport
    from pdctl.preflight.transfer import _path, expected_gbps
    from pdctl.transfer.sglang_stack.rehearsal import Rehearsal

    topo = ctx.topo
    src, dst = topo.node(source), topo.node(target)
    base = TransferResult(source, target, topo.transfer.backend, "unknown", None, 0.0, 0.0, False,
                          details={"stack": "sglang", "why": choice.why})
    pre, dec = side_specs(topo, tokens=tokens, prefill_host=src.address, decode_host=dst.address, timeout=TIMEOUT_S)
    env = {**topo.engine.env, **transfer_env(topo, nvlink, "prefill")}

    def popen(node: Any) -> Any:
        executor = node_executor(node, slurm=slurm, topo=topo)
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
    carried = transport(topo.transfer.backend, log)
    _, crosses = _path(ctx, topo, source, target, log)
    seconds = float(outcome.get("seconds") or 0.0)
    nbytes, descs = int(outcome.get("bytes") or 0), int(outcome.get("descriptors") or 0)
    return replace(
        base, transport=carried, crosses_nodes=crosses, verified=bool(outcome["verified"]),
        gbps=nbytes / seconds / 1e9 if seconds > 0 and outcome["verified"] else 0.0,
        us_per_descriptor=seconds / max(1, descs) * 1e6, descriptors=descs, bytes=nbytes,
        expected_gbps=expected_gbps(ctx, source, target, nvlink),
        error=None if outcome["verified"] else f"SGLang's stack failed at {outcome['stage']}: {outcome['error']}",
        details=base.details | {"tokens": tokens, "sglang_version": rehearsal.sglang, "stage": outcome["stage"],
                                "memory": "VRAM" if pre.device == "cuda" else "DRAM",
                                "guards_bypassed": outcome.get("bypasses", [])},
    )
