"""Rules about where things run: GPU architecture, GPU placement, port bindings, the transfer backend.

These fail at server start (kernels that do not exist on the GPU, ports already bound, GPUs taken) rather
than at the handshake; catching them here saves a multi-node launch.
"""

from __future__ import annotations

from pdctl.compat.context import BLACKWELL, HOPPER, Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import facts, messages
from pdctl.topology.placement import placement_problems, port_clashes
from pdctl.transfer.registry import NAMES, stack

KNOWN_BACKENDS = NAMES  # pdctl.transfer.registry


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
        return fired(f"{messages.MXFP8_NEEDS_BLACKWELL} ({', '.join(bad)})")
    used = any(r.kv_cache_dtype == "mxfp8" for r in ctx.roles())
    return passed("mxfp8 on Blackwell GPUs" if used else "kv_cache_dtype is not mxfp8")


def attention_backend_gpu(ctx: Context) -> Outcome:
    """fa3 needs SM80-SM90 (not Blackwell); trtllm_mha needs SM90/SM100/SM120 and a non-MLA model."""
    bad: list[str] = []
    chosen: list[str] = []
    for role in ctx.roles():
        kinds = [k for k in ctx.gpu_kinds(role) if k != "cpu"]
        for backend in role.attention_backends:
            chosen.append(f"{role.name}={backend}")
            if backend == "fa3":
                for kind in kinds:
                    if kind in BLACKWELL:
                        bad.append(f"{role.name}: {messages.fa3_gpu(kind)}")
            if backend == "trtllm_mha":
                if ctx.mla:
                    bad.append(f"{role.name}: {messages.TRTLLM_MHA_MLA}")
                for kind in kinds:
                    if kind not in BLACKWELL and kind not in HOPPER:
                        bad.append(f"{role.name}: {messages.trtllm_mha_gpu(kind)}")
    if bad:
        return fired("; ".join(bad))
    return passed(", ".join(chosen) + " fit the GPUs" if chosen else "attention backend chosen by SGLang")


def placement(ctx: Context) -> Outcome:
    """Every replica needs tp x pp GPUs of its own; roles sharing a node must not share GPUs."""
    problems = placement_problems(ctx.topo, ctx.placements)
    if problems:
        return fired("; ".join(problems))
    parts = " and ".join(f"{r.name} {r.replicas} x {r.gpus_per_replica}" for r in ctx.roles())
    return passed(f"{parts} GPUs fit {'their' if len(ctx.roles()) > 1 else 'its'} nodes")


def bootstrap_port(ctx: Context) -> Outcome:
    """Two processes on one machine binding one port: the second fails, or decode meets the wrong prefill."""
    clashes = port_clashes(ctx.topo, ctx.placements)
    if clashes:
        return fired("; ".join(clashes))
    kinds = "HTTP and router" if ctx.colocated else "HTTP, bootstrap and router"
    return passed(f"{kinds} ports are distinct on every machine")


def backend_known(ctx: Context) -> Outcome:
    """The transfer backends pdctl drives, the same on both roles; mooncake over TCP has no RDMA device."""
    names = {r.name: r.backend for r in ctx.roles()}
    unknown = [f"{n}={b}" for n, b in names.items() if b not in KNOWN_BACKENDS]
    if unknown:
        return fired(f"transfer backend {', '.join(unknown)}: pdctl drives {', '.join(KNOWN_BACKENDS)}")
    if len(set(names.values())) > 1:
        return fired(messages.transfer_backend_mismatch(ctx.pre.transfer_backend, ctx.dec.transfer_backend))
    t = ctx.topo.transfer
    device = t.ib_device or next((r.get("disaggregation_ib_device") for r in ctx.roles()
                                  if r.transfer_backend == "mooncake_tcp" and r.get("disaggregation_ib_device")), None)
    if ctx.pre.transfer_backend == "mooncake_tcp" and device:
        return fired(
            f"mooncake over tcp (mooncake_tcp) uses no RDMA device, but an IB device ({device!r}) is set "
            "(--disaggregation-ib-device is RDMA-only; SGLang ignores it)"
        )
    return passed(f"{ctx.backend} over {ctx.pre.protocol}")


def kv_layout_platform(ctx: Context) -> Outcome:
    """The KV layout the processes will really use must be the one the topology says (and the rules judged)."""
    bad = []
    for role in ctx.roles():
        want = role.intent.kv_layout
        if role.kv_layout == want:
            continue
        kinds = "/".join(ctx.gpu_kinds(role))
        if want == "vectorized_5d":
            bad.append(f"{role.name}: kv_layout vectorized_5d cannot be selected on {kinds} (NVIDIA or CPU): "
                       "SGLANG_AITER_KV_CACHE_LAYOUT is read only by ROCm's aiter attention backend, so SGLang "
                       f"runs {role.kv_layout.upper()}")
        else:
            bad.append(f"{role.name}: the topology says kv_layout {want}, but its environment makes SGLang use "
                       f"{role.kv_layout.upper()} (SGLANG_USE_HND_KVCACHE in engine.env)")
    if bad:
        return fired("; ".join(bad))
    return passed(", ".join(f"{r.name} {r.kv_layout.upper()}" for r in ctx.roles()))


def dsa_page_size(ctx: Context) -> Outcome:
    """SGLang sets a DSA model's page size itself: the topology's page_size must be the one that runs."""
    if not ctx.spec.dsa or (ctx.spec.model_type or "") not in facts.DSA_MODEL_TYPES:
        return passed("not a DSA model SGLang sets the page size of")
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: runs the topology's page size")
    forced = facts.DSA_PAGE * (ctx.spec.index_kpool if ctx.since(facts.DSA_PAGE_KPOOL_SINCE) else 1)
    said = messages.dsa_page_size(forced, ctx.eff.version.parsed)
    bad = [f"{r.name} page_size {r.page_size}" for r in ctx.roles() if r.page_size is not None and r.page_size != forced]
    if bad:
        return fired(f"SGLang says '{said}' ({', '.join(bad)} is not what runs: the plan, the KV estimate and the "
                     "rules judged another page size)")
    return passed(f"page_size {forced}, the one SGLang sets for DSA")


def kv_layout_pd(ctx: Context) -> Outcome:
    """SGLang builds its PD transfer buffers only from NHD pools: with SGLANG_USE_HND_KVCACHE every prefill
    and decode server asserts at startup (`get_contiguous_buf_infos`, SGLang 0.5.16 - 0.5.23; measured live on
    SGLang's stack). The reference engine's own transfer carries HND pages, so it is judged only when SGLang's
    code runs: SGLang servers, or the reference engine on `transfer.stack: sglang`."""
    if not ctx.sglang and not stack(ctx.topo.transfer.stack).sglang_code:
        return passed("reference engine on pdctl's transfer: HND pages are carried by pdctl's own code")
    hnd = [r.name for r in ctx.roles() if r.kv_layout == "hnd"]
    if hnd:
        return fired(f"{' and '.join(hnd)} run{'s' if len(hnd) == 1 else ''} the HND KV layout (SGLANG_USE_HND_KVCACHE): "
                     f"{messages.HND_DISAGG} (assertion at server startup)")
    return passed("NHD KV layout on both roles")
