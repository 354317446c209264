"""Rules SGLang enforces when a decode server first meets a prefill server (the bootstrap handshake).

The decode side fetches the prefill's server info (`common/conn.py::try_ensure_parallel_info`), compares page
size and KV dtype, and maps ranks (`_resolve_rank_mapping`, which asserts the PP pairing). These break every
deployment, whatever the model.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import messages


def page_size_match(ctx: Context) -> Outcome:
    """Both servers must page the KV cache the same way: pages are the unit of transfer."""
    p, d = ctx.pre.page_size, ctx.dec.page_size
    if p != d:
        return fired(messages.page_size_mismatch(p, d))
    return passed(f"page_size {p} on both roles")


def kv_dtype_match(ctx: Context) -> Outcome:
    """SGLang compares the --kv-cache-dtype strings as given (auto and bf16 are different strings)."""
    p, d = ctx.pre.kv_cache_dtype, ctx.dec.kv_cache_dtype
    if p != d:
        return fired(messages.kv_dtype_mismatch(p, d))
    return passed(f"kv_cache_dtype {p} on both roles")


def pp_pairing(ctx: Context) -> Outcome:
    """Decode pulls layer stages from prefill: its PP must equal prefill's or be 1."""
    p, d = ctx.pre.pp, ctx.dec.pp
    if d not in (p, 1):
        return fired(messages.pp_mismatch(d, p))
    return passed(f"prefill pp {p}, decode pp {d}")
