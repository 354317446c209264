"""Rules SGLang enforces when a decode server first meets a prefill server (and at model load).

The prefill/decode bootstrap handshake (`common/conn.py`) compares page size and KV dtype and maps ranks;
model load asserts that attention TP splits the heads. These break every deployment, whatever the model.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.plan.heads import ratio_ok


def page_size_match(ctx: Context) -> Outcome:
    """Both servers must page the KV cache the same way: pages are the unit of transfer."""
    p, d = ctx.pre.page_size, ctx.dec.page_size
    if p != d:
        return fired(
            f"Page size mismatch: prefill server has page_size={p}, but decode server has page_size={d}. "
            "Both servers must use the same --page-size value."
        )
    return passed(f"page_size {p} on both roles")


def kv_dtype_match(ctx: Context) -> Outcome:
    """SGLang compares the --kv-cache-dtype strings as given (auto and bf16 are different strings)."""
    p, d = ctx.pre.kv_cache_dtype, ctx.dec.kv_cache_dtype
    if p != d:
        return fired(
            f"KV cache dtype mismatch: prefill server has kv_cache_dtype={p}, but decode server has "
            f"kv_cache_dtype={d}. Both servers must use the same --kv-cache-dtype value."
        )
    return passed(f"kv_cache_dtype {p} on both roles")


def pp_pairing(ctx: Context) -> Outcome:
    """Decode pulls layer stages from prefill: its PP must equal prefill's or be 1."""
    p, d = ctx.pre.pp, ctx.dec.pp
    if d not in (p, 1):
        return fired(f"Decode pp size ({d}) should be equal to prefill pp size ({p}) or 1")
    return passed(f"prefill pp {p}, decode pp {d}")


def heads_divisible(ctx: Context) -> Outcome:
    """Model load asserts heads % attn_tp == 0 and (kv_heads % attn_tp == 0 or attn_tp % kv_heads == 0)."""
    spec = ctx.spec
    problems: list[str] = []
    for role in ctx.roles():
        tp = role.attn_tp
        if spec.num_attention_heads % tp:
            problems.append(
                f"{role.name}: {spec.num_attention_heads} attention heads are not divisible by attention TP {tp}"
            )
        kv = spec.num_kv_heads
        if not spec.mla and kv % tp and tp % kv:
            problems.append(
                f"{role.name}: {kv} KV heads and attention TP {tp}: neither divides the other "
                "(a rank must hold whole heads, or one head replicated tp/kv_heads times)"
            )
    if problems:
        return fired("model load fails (assert total_num_heads % attn_tp_size == 0 / "
                     "total_num_kv_heads % attn_tp_size == 0 or attn_tp_size % total_num_kv_heads == 0): "
                     + "; ".join(problems))
    kv_note = "MLA latent replicated" if spec.mla else f"{spec.num_kv_heads} KV heads"
    tps = " / ".join(f"{r.attn_tp} ({r.name})" for r in ctx.roles())
    return passed(f"{spec.num_attention_heads} heads, {kv_note}; attention TP {tps} hold"
                  + ("s" if len(ctx.roles()) == 1 else "") + " whole heads")


def attn_tp_ratio(ctx: Context) -> Outcome:
    """SGLang maps decode rank d to prefill rank d // (d_tp // p_tp) (or a range): the ratio must be whole."""
    p, d = ctx.pre.attn_tp, ctx.dec.attn_tp
    if not ratio_ok(p, d):
        return fired(
            f"attention TP sizes prefill={p}, decode={d}: neither divides the other, so SGLang's rank mapping "
            f"(target_tp_rank = rank // (decode_tp // prefill_tp)) pairs decode ranks with prefill ranks "
            "that do not exist or hold other heads"
        )
    return passed(f"attention TP {p} -> {d}" + ("" if p == d else f" (ratio {max(p, d) // min(p, d)})"))
