"""Rules of the heterogeneous-TP transfer of sliding-window (SWA) state, SGLang's head-slice path.

With unequal attention TP, a hybrid-SWA non-MLA model's window pages go through `_get_mha_head_slice_blocks`,
which assumes pp=1, NHD pages and per-layer K/V buffers; releases before it refused the combination at the
first transfer. MXFP8's block scales cannot be head-sliced at all (refused at the handshake).
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import facts, messages


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
        return fired(f"{messages.SWA_HETERO_TP_PP} (prefill pp={ctx.pre.pp}, decode pp={ctx.dec.pp})")
    return passed("pp 1 on both roles")


def hetero_tp_swa_layout(ctx: Context) -> Outcome:
    """Head-slice addresses assume NHD pages; HND pages (SGLANG_USE_HND_KVCACHE) are refused."""
    skip = _not_applicable(ctx)
    if skip:
        return skip
    bad = [f"{r.name}={r.kv_layout}" for r in ctx.roles() if r.kv_layout != "nhd"]
    if bad:
        layout = next(r.kv_layout for r in ctx.roles() if r.kv_layout != "nhd")
        return fired(f"{messages.head_slice_layout(layout)} ({', '.join(bad)})")
    return passed("NHD layout on both roles")


def hetero_tp_swa_buffers(ctx: Context) -> Outcome:
    """Unified memory registers one page envelope, not per-layer K/V buffers to slice heads from."""
    skip = _not_applicable(ctx)
    if skip:
        return skip
    uni = [r for r in ctx.roles() if r.unified_memory]
    if uni:
        return fired(f"{messages.head_slice_buffers(ctx.kv_entries(ctx.pre), ctx.kv_entries(ctx.dec))} "
                     f"(unified_memory on {', '.join(r.name for r in uni)})")
    return passed("per-layer K/V buffers on both roles")


def hetero_tp_mxfp8(ctx: Context) -> Outcome:
    """MXFP8 block scales are per page rows and cannot be resliced by attention head (decode refuses)."""
    if ctx.mla or not ctx.unequal:
        return passed("equal attention TP" if not ctx.unequal else "MLA model")
    dtypes = {r.kv_cache_dtype for r in ctx.roles()}
    if ctx.dec.kv_cache_dtype == "mxfp8":
        states = ["block_scale"] + (["block_scale_swa"] if ctx.hybrid_swa else [])
        return fired(messages.mxfp8_hetero_tp(ctx.pre.attn_tp, ctx.dec.attn_tp, states))
    return passed(f"kv_cache_dtype {'/'.join(sorted(dtypes))}")


def hetero_tp_swa_version(ctx: Context) -> Outcome:
    """SGLang before the head-slice SWA transfer refuses unequal TP for hybrid-SWA models at the first transfer."""
    skip = _not_applicable(ctx)
    if skip:
        return skip
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: implements the head-slice path")
    if not ctx.since(facts.SWA_HETERO_TP_SINCE):
        said = messages.hybrid_state_hetero_tp("SWA", ctx.eff.version.parsed)
        if said is None:  # before SGLang checked it: nothing stops the transfer, the SWA state is not resliced
            return fired(f"{ctx.version_words} has no PD transfer for the sliding-window state of a hybrid model "
                         f"with different attention TP (not even the refusal, which arrived in "
                         f"{messages.HYBRID_HETERO_TP_CHECK_SINCE}; the head-slice SWA transfer in "
                         f"{facts.SWA_HETERO_TP_SINCE}): decode's SWA layers do not get the prefill's state")
        return fired(f"{said} ({ctx.version_words}; the head-slice SWA transfer arrived in "
                     f"{facts.SWA_HETERO_TP_SINCE})")
    return passed(f"{ctx.version_words} has the head-slice SWA transfer")


def hybrid_swa_memory_match(ctx: Context) -> Outcome:
    """One role with a separate SWA pool and one without register KV regions and state lists that do not pair:
    SGLang accepts them at the handshake and fails the first transfer (measured on SGLang 0.5.23's stack,
    both backends, equal and unequal TP: docs/sglang-stack.md)."""
    if not ctx.spec.hybrid_swa:
        return passed("model has no sliding-window layers")
    on = [r.name for r in ctx.roles() if r.hybrid_swa_memory]
    if len(on) == 1:
        off = "decode" if on[0] == "prefill" else "prefill"
        return fired(
            f"{on[0]} keeps sliding-window layers in a separate SWA pool (hybrid_swa_memory on) but {off} does "
            "not (--disable-hybrid-swa-memory): their KV regions and per-request SWA state do not pair up; "
            "SGLang accepts this at the handshake and fails the first transfer (e.g. NIXL: "
            f"'{messages.state_index_mismatch(0, 3, 0)}'; Mooncake: 'Failed to send state components', or a "
            "dead transfer thread and a request that hangs)"
        )
    return passed("hybrid_swa_memory " + ("on" if on else "off") + " on both roles")
