"""Rules of the heterogeneous-TP transfer of sliding-window (SWA) state, SGLang 0.5.23's head-slice path.

With unequal attention TP, a hybrid-SWA non-MLA model's window pages go through `_get_mha_head_slice_blocks`,
which assumes pp=1, NHD pages and per-layer K/V buffers; older SGLang refused the combination outright.
MXFP8's block scales cannot be head-sliced at all.
"""

from __future__ import annotations

from pdctl.compat.context import Context, parse_version
from pdctl.compat.findings import Outcome, fired, passed

FIRST_SWA_HETERO_TP = (0, 5, 23, 0, 0)


def _not_applicable(ctx: Context) -> Outcome | None:
    if not ctx.unequal:
        return passed(f"equal attention TP ({ctx.pre.attn_tp}): whole pages, no head slicing")
    if ctx.mla:
        return passed("MLA model: latent KV is replicated, no head slicing")
    if not ctx.hybrid_swa:
        why = "has no sliding-window layers" if not ctx.spec.hybrid_swa else "runs with hybrid_swa_memory: false"
        return passed(f"model {why}: no SWA state to head-slice")
    return None


def hetero_tp_swa_pp(ctx: Context) -> Outcome:
    """SWA state has no layer ids, so a prefill PP stage's entries cannot be paired with decode's layers."""
    skip = _not_applicable(ctx)
    if skip:
        return skip
    if ctx.pre.pp > 1 or ctx.dec.pp > 1:
        return fired(
            "PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models with "
            f"pipeline parallelism yet. (prefill pp={ctx.pre.pp}, decode pp={ctx.dec.pp})"
        )
    return passed("pp 1 on both roles")


def hetero_tp_swa_layout(ctx: Context) -> Outcome:
    """Head-slice addresses assume NHD pages; HND / vectorized_5d pages would be silently scrambled."""
    skip = _not_applicable(ctx)
    if skip:
        return skip
    bad = [f"{r.name}={r.kv_layout}" for r in ctx.roles() if r.kv_layout != "nhd"]
    if bad:
        layout = next(r.kv_layout for r in ctx.roles() if r.kv_layout != "nhd")
        return fired(f"Head-sliced PD transfer needs the NHD KV cache layout, got {layout} ({', '.join(bad)})")
    return passed("NHD layout on both roles")


def hetero_tp_swa_buffers(ctx: Context) -> Outcome:
    """Unified memory registers one page envelope, not per-layer K/V buffers to slice heads from."""
    skip = _not_applicable(ctx)
    if skip:
        return skip
    uni = [r for r in ctx.roles() if r.unified_memory]
    if uni:
        return fired(
            "Head-sliced PD transfer needs matching per-layer K/V buffers: "
            f"prefill has {ctx.kv_entries(ctx.pre)} entries, decode has {ctx.kv_entries(ctx.dec)} "
            f"(unified_memory on {', '.join(r.name for r in uni)})"
        )
    return passed("per-layer K/V buffers on both roles")


def hetero_tp_mxfp8(ctx: Context) -> Outcome:
    """MXFP8 block scales are per page rows and cannot be resliced by attention head."""
    if ctx.mla or not ctx.unequal:
        return passed("equal attention TP" if not ctx.unequal else "MLA model")
    dtypes = {r.kv_cache_dtype for r in ctx.roles()}
    if "mxfp8" in dtypes:
        return fired(
            "PD Disaggregation does NOT support different attention TP sizes with MXFP8 KV cache: "
            f"prefill attn_tp_size={ctx.pre.attn_tp}, decode attn_tp_size={ctx.dec.attn_tp}"
        )
    return passed(f"kv_cache_dtype {'/'.join(sorted(dtypes))}")


def hetero_tp_swa_version(ctx: Context) -> Outcome:
    """SGLang before 0.5.23 rejects heterogeneous TP for hybrid-SWA models at the handshake."""
    skip = _not_applicable(ctx)
    if skip:
        return skip
    engine = ctx.topo.engine
    if engine.kind != "sglang" or not engine.version:
        return passed("engine version not pinned (assuming SGLang >= 0.5.23)" if engine.kind == "sglang"
                      else f"engine {engine.kind}: implements the head-slice path")
    version = parse_version(engine.version)
    if version is None:
        return passed(f"engine.version {engine.version!r} not understood; assuming >= 0.5.23")
    if version < FIRST_SWA_HETERO_TP:
        return fired(
            "PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models yet. "
            f"(SGLang {engine.version}; the head-slice SWA transfer arrived in 0.5.23)"
        )
    return passed(f"SGLang {engine.version} has the head-slice SWA transfer")


def hybrid_swa_memory_match(ctx: Context) -> Outcome:
    """One role with a separate SWA pool and one without register KV regions and state lists that do not pair."""
    if not ctx.spec.hybrid_swa:
        return passed("model has no sliding-window layers")
    on = [r.name for r in ctx.roles() if r.hybrid_swa_memory]
    if len(on) == 1:
        off = "decode" if on[0] == "prefill" else "prefill"
        return fired(
            f"{on[0]} keeps sliding-window layers in a separate SWA pool (hybrid_swa_memory on) but {off} does "
            "not (--disable-hybrid-swa-memory): their KV regions and per-request SWA state do not pair up, and "
            "SGLang does not check this at the handshake"
        )
    return passed("hybrid_swa_memory " + ("on" if on else "off") + " on both roles")
