"""Rules of SGLang's optional KV memory modes: unified memory (one page envelope) and the staging buffer.

Both change what a KV transfer is made of, so SGLang restricts them at startup (server_args hooks,
prefill/decode init) and at the handshake; these mirror those checks with SGLang's wording.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed


def sglang_backend_name(ctx: Context) -> str:
    """The --disaggregation-transfer-backend value launch renders (mooncake over tcp is `mooncake_tcp`)."""
    if ctx.backend == "mooncake" and ctx.topo.transfer.protocol == "tcp":
        return "mooncake_tcp"
    return ctx.backend


def _unified_roles(ctx: Context) -> list[str]:
    return [r.name for r in ctx.roles() if r.unified_memory]


def unified_memory_backend(ctx: Context) -> Outcome:
    """The whole-envelope transfer is implemented by Mooncake (RDMA) only."""
    roles = _unified_roles(ctx)
    if not roles:
        return passed("unified memory off")
    name = sglang_backend_name(ctx)
    if name != "mooncake":
        return fired(
            "--enable-unified-memory with PD disaggregation supports only these transfer backends: "
            f"mooncake; got {name!r}."
        )
    return passed("unified memory over mooncake")


def unified_memory_pp(ctx: Context) -> Outcome:
    """The envelope has no per-layer entries to split across pipeline stages."""
    bad = [f"{r.name} pp={r.pp}" for r in ctx.roles() if r.unified_memory and r.pp > 1]
    if bad:
        return fired(
            "--enable-unified-memory with PD disaggregation does not support pipeline parallelism "
            f"(whole-envelope transfer has no per-layer entries to subset). ({', '.join(bad)})"
        )
    return passed("unified memory off" if not _unified_roles(ctx) else "pp 1 with unified memory")


def unified_memory_tp(ctx: Context) -> Outcome:
    """The envelope state cannot be resliced across different attention TP sizes."""
    if not _unified_roles(ctx):
        return passed("unified memory off")
    if ctx.unequal:
        return fired(
            "--enable-unified-memory does not support different prefill / decode attention TP sizes "
            f"(prefill={ctx.pre.attn_tp}, decode={ctx.dec.attn_tp}): the whole-envelope state cannot be "
            "TP-resliced."
        )
    return passed(f"equal attention TP ({ctx.pre.attn_tp})")


def unified_memory_both(ctx: Context) -> Outcome:
    """One envelope region on one side against per-layer regions on the other do not pair up."""
    roles = _unified_roles(ctx)
    if len(roles) == 1:
        return fired(
            "PD KV layout mismatch on the whole-envelope path: prefill has "
            f"{ctx.kv_entries(ctx.pre)} KV region(s), decode has {ctx.kv_entries(ctx.dec)}. With --enable-unified-memory both sides must "
            f"enable it and use the same page size and model spec. (set only on {roles[0]})"
        )
    return passed("unified memory off" if not roles else "unified memory on both roles")


def staging_mla(ctx: Context) -> Outcome:
    """The staging buffer gathers head slices; MLA has none."""
    if ctx.staging and ctx.mla:
        return fired(
            "SGLANG_DISAGG_STAGING_BUFFER is designed for non-MLA models (e.g. GQA, MHA). "
            "MLA models should not set this flag."
        )
    return passed("staging buffer off" if not ctx.staging else "non-MLA model")


def staging_chunk(ctx: Context) -> Outcome:
    """Staging slices each send into a page-aligned grid of chunked_prefill_size tokens (prefill side)."""
    if not ctx.staging:
        return passed("staging buffer off")
    cps_raw = ctx.pre.chunked_prefill_size
    cps = cps_raw or 8192
    page = ctx.pre.page_size
    if cps <= 0 or cps % page != 0:
        return fired(
            "SGLANG_DISAGG_STAGING_BUFFER requires a positive chunked_prefill_size that is a multiple of "
            f"page_size ({page}); got {cps_raw}."
        )
    return passed(f"chunked_prefill_size {cps} is a multiple of page_size {page}")


def staging_pp(ctx: Context) -> Outcome:
    """Only Mooncake implements the staged transfer across pipeline stages."""
    if not ctx.staging:
        return passed("staging buffer off")
    if any(r.pp > 1 for r in ctx.roles()) and ctx.backend != "mooncake":
        return fired("SGLANG_DISAGG_STAGING_BUFFER with pp_size > 1 is only supported by Mooncake.")
    return passed(f"staging with pp {ctx.pre.pp}/{ctx.dec.pp} over {ctx.backend}")


def staging_swa_scope(ctx: Context) -> Outcome:
    """Staging carries the full-attention KV only; the SWA window still goes by per-token head slices."""
    if ctx.staging and ctx.hybrid_swa and ctx.unequal:
        return fired(
            "the staging buffer carries only full-attention KV; the SWA window pages still go by per-token "
            "head slices (one descriptor per token per SWA layer K/V)"
        )
    return passed("not applicable" if not ctx.staging else "no SWA head slicing alongside staging")
