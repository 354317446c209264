"""Rules about where things run: GPU architecture, GPU placement, port bindings, the transfer backend.

These fail at server start (kernels that do not exist on the GPU, ports already bound, GPUs taken) rather
than at the handshake; catching them here saves a multi-node launch.
"""

from __future__ import annotations

from pdctl.compat.context import BLACKWELL, HOPPER, Context
from pdctl.compat.findings import Outcome, fired, passed

KNOWN_BACKENDS = ("nixl", "mooncake")


def mxfp8_gpu(ctx: Context) -> Outcome:
    """MXFP8 KV uses block-scaled operands that exist on SM100+ (Blackwell) only."""
    bad: list[str] = []
    for role in ctx.roles():
        if role.kv_cache_dtype != "mxfp8":
            continue
        for kind in ctx.gpu_kinds(role):
            if kind != "cpu" and kind not in BLACKWELL:
                bad.append(f"{role.name} on {kind}")
    if bad:
        return fired(
            "--kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU for the block-scaled operands used by "
            f"the FA4 MXFP8 attention path. ({', '.join(bad)})"
        )
    used = any(r.kv_cache_dtype == "mxfp8" for r in ctx.roles())
    return passed("mxfp8 on Blackwell GPUs" if used else "kv_cache_dtype is not mxfp8")


def _backends(role: object) -> list[str]:
    names = [getattr(role, "attention_backend", None)]
    args = getattr(role, "args", {}) or {}
    names += [args.get("prefill-attention-backend"), args.get("decode-attention-backend")]
    return [str(n) for n in names if n]


def attention_backend_gpu(ctx: Context) -> Outcome:
    """fa3 needs SM80-SM90 (not Blackwell); trtllm_mha needs SM90/SM100/SM120 and a non-MLA model."""
    bad: list[str] = []
    chosen: list[str] = []
    for role in ctx.roles():
        kinds = [k for k in ctx.gpu_kinds(role) if k != "cpu"]
        for backend in _backends(role):
            chosen.append(f"{role.name}={backend}")
            if backend == "fa3":
                for kind in kinds:
                    if kind in BLACKWELL:
                        bad.append(f"{role.name}: FlashAttention v3 Backend requires SM>=80 and SM<=90 "
                                   f"(got {kind}). Please use `--attention-backend flashinfer`.")
            if backend == "trtllm_mha":
                if ctx.mla:
                    bad.append(f"{role.name}: trtllm_mha backend can only be used with non-MLA models.")
                for kind in kinds:
                    if kind not in BLACKWELL and kind not in HOPPER:
                        bad.append(f"{role.name}: TRTLLM MHA backend requires Hopper (SM90), Blackwell (SM100), "
                                   f"or SM120 GPUs (got {kind}).")
    if bad:
        return fired("; ".join(bad))
    return passed(", ".join(chosen) + " fit the GPUs" if chosen else "attention backend chosen by SGLang")


def placement(ctx: Context) -> Outcome:
    """Every replica needs tp x pp GPUs of its own; roles sharing a node must not share GPUs."""
    from pdctl.topology.placement import placement_problems

    problems = placement_problems(ctx.topo)
    if problems:
        return fired("; ".join(problems))
    parts = " and ".join(f"{r.name} {r.replicas} x {r.gpus_per_replica}" for r in ctx.roles())
    return passed(f"{parts} GPUs fit {'their' if len(ctx.roles()) > 1 else 'its'} nodes")


def bootstrap_port(ctx: Context) -> Outcome:
    """Two processes on one machine binding one port: the second fails, or decode meets the wrong prefill."""
    from pdctl.topology.placement import port_clashes

    clashes = port_clashes(ctx.topo)
    if clashes:
        return fired("; ".join(clashes))
    kinds = "HTTP and router" if ctx.colocated else "HTTP, bootstrap and router"
    return passed(f"{kinds} ports are distinct on every machine")


def backend_known(ctx: Context) -> Outcome:
    """SGLang's transfer backends pdctl can drive; mooncake over TCP has no RDMA device to name."""
    t = ctx.topo.transfer
    if t.backend not in KNOWN_BACKENDS:
        return fired(f"unknown transfer backend {t.backend!r} (pdctl drives: {', '.join(KNOWN_BACKENDS)})")
    if t.backend == "mooncake" and t.protocol == "tcp" and t.ib_device:
        return fired(
            f"mooncake over tcp (mooncake_tcp) uses no RDMA device, but transfer.ib_device={t.ib_device!r} "
            "is set (--disaggregation-ib-device is RDMA-only)"
        )
    return passed(f"{t.backend} over {t.protocol}")
