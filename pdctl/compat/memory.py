"""Rules of SGLang's optional KV memory modes: unified memory (one page envelope) and the staging buffer.

Both change what a KV transfer is made of, so SGLang restricts them at startup (ServerArgs hooks, prefill and
decode init) and in the sender; these mirror those checks with SGLang's wording.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import messages


def _unified_roles(ctx: Context) -> list[str]:
    return [r.name for r in ctx.roles() if r.unified_memory]


def unified_memory_backend(ctx: Context) -> Outcome:
    """The whole-envelope transfer is implemented by Mooncake (RDMA) only."""
    roles = [r for r in ctx.roles() if r.unified_memory]
    if not roles:
        return passed("unified memory off")
    bad = [r for r in roles if r.transfer_backend != "mooncake"]
    if bad:
        return fired(messages.unified_memory_backends(bad[0].transfer_backend))
    return passed("unified memory over mooncake")


def unified_memory_pp(ctx: Context) -> Outcome:
    """The envelope has no per-layer entries, so a PP stage cannot take its share."""
    bad = [f"{r.name} pp={r.pp}" for r in ctx.roles() if r.unified_memory and r.pp > 1]
    if bad:
        return fired(f"{messages.UNIFIED_MEMORY_PP} ({', '.join(bad)})")
    return passed("unified memory off" if not _unified_roles(ctx) else "pp 1 with unified memory")


def unified_memory_tp(ctx: Context) -> Outcome:
    """The envelope state cannot be resliced across different attention TP sizes."""
    if not _unified_roles(ctx):
        return passed("unified memory off")
    if ctx.unequal:
        return fired(messages.unified_memory_tp(ctx.pre.attn_tp, ctx.dec.attn_tp))
    return passed(f"equal attention TP ({ctx.pre.attn_tp})")


def unified_memory_both(ctx: Context) -> Outcome:
    """One envelope region on one side against per-layer regions on the other do not pair up."""
    roles = _unified_roles(ctx)
    if len(roles) == 1:
        return fired(f"{messages.unified_memory_layout(ctx.kv_entries(ctx.pre), ctx.kv_entries(ctx.dec))} "
                     f"(set only on {roles[0]})")
    return passed("unified memory off" if not roles else "unified memory on both roles")


def staging_mla(ctx: Context) -> Outcome:
    """The staging buffer gathers head slices; MLA has none (prefill and decode init refuse it)."""
    if ctx.staging and ctx.mla:
        return fired(messages.STAGING_MLA)
    return passed("staging buffer off" if not ctx.staging else "non-MLA model")


def staging_chunk(ctx: Context) -> Outcome:
    """Staging slices each send into a page-aligned grid of chunked_prefill_size tokens (prefill side)."""
    if not ctx.pre.staging:
        return passed("staging buffer off")
    cps_raw = ctx.pre.chunked_prefill_size
    cps = cps_raw or 8192
    page = ctx.pre.page_size or 1
    if cps <= 0 or cps % page != 0:
        return fired(messages.staging_chunk(page, cps_raw))
    return passed(f"chunked_prefill_size {cps} is a multiple of page_size {page}")


def staging_pp(ctx: Context) -> Outcome:
    """Only Mooncake implements the staged transfer across pipeline stages (prefill init refuses the rest)."""
    if not ctx.pre.staging:
        return passed("staging buffer off")
    if ctx.pre.pp > 1 and ctx.pre.backend != "mooncake":
        return fired(messages.STAGING_PP)
    return passed(f"staging with pp {ctx.pre.pp}/{ctx.dec.pp} over {ctx.backend}")


def staging_swa_scope(ctx: Context) -> Outcome:
    """Staging carries the full-attention KV only; the SWA window still goes by per-token head slices."""
    if ctx.staging and ctx.hybrid_swa and ctx.unequal:
        return fired(
            "the staging buffer carries only full-attention KV; the SWA window pages still go by per-token "
            "head slices (one descriptor per token per SWA layer K/V)"
        )
    return passed("not applicable" if not ctx.staging else "no SWA head slicing alongside staging")
