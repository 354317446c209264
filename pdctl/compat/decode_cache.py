"""Decode-side caches as field incidents: HiCache with an L3 storage backend behind the decode radix cache, and
DeepSeek-V4's KV-full retraction (its KV has no CPU copy).

SGLang starts both and fails later: a request whose promised L3 prefix never loads (sglang#30322), the decode
scheduler dying at the first retraction (sglang#33385). The releases are read off the wheels
(pdctl/sglang/incidents.py says where).
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import incidents, messages

# model_type values SGLang serves with DeepseekV4ForCausalLM and its DeepSeekV4TokenToKVPool (deepseek_v41.py maps
# DeepseekV41ForCausalLM onto it, first in 0.5.21)
DEEPSEEK_V4_POOL_TYPES = frozenset({"deepseek_v4", "deepseek_v41"})


def decode_hicache_l3(ctx: Context) -> Outcome:
    """Decode radix cache + HiCache + an L3 storage backend: a declined L3 prefetch still promises its prefix."""
    dec = ctx.dec
    backend = dec.get("hicache_storage_backend")
    if not (dec.radix_cache and dec.get("enable_hierarchical_cache", False) and backend is not None):
        return passed("decode does not run HiCache with an L3 storage backend behind its radix cache")
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no SGLang decode HiCache")
    incident = incidents.DECODE_HICACHE_L3
    if not incident.affects(ctx.eff.version.version):
        return passed(f"decode HiCache L3 ({backend}) on {ctx.version_words}: a declined prefetch clears its span")
    return fired(messages.decode_hicache_l3(dec.name, backend, ctx.version_words, incident.fixed or "no release")
                 + f" ({incident.report})")


def dsv4_decode_retraction(ctx: Context) -> Outcome:
    """DeepSeek-V4 on decode: a KV-full retraction backs its KV up to the CPU, which its pool cannot copy."""
    mtype = ctx.spec.model_type or ""
    if mtype not in DEEPSEEK_V4_POOL_TYPES:
        return passed(f"model {mtype or ctx.spec.name} is not DeepSeek-V4")
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no SGLang decode")
    incident = incidents.DSV4_DECODE_RETRACTION
    if not incident.affects(ctx.eff.version.version):
        return passed(f"DeepSeek-V4 decode on {ctx.version_words}: a retracted request is recomputed by prefill")
    backup = ctx.dec.get("disaggregation_decode_retraction_backup")
    if backup == "none" and ctx.since(incidents.DSV4_RETRACTION_NONE_SINCE):
        return passed("decode's retraction backup is none: a retracted request is aborted, no CPU copy")
    if backup == "host_pool":  # the tree's host pool, not get_cpu_copy (whether it serves DeepSeek-V4: unread)
        return passed("decode's retraction backup is host_pool: not the CPU copy of sglang#33385")
    return fired(messages.dsv4_decode_retraction(ctx.dec.name, ctx.version_words, incident.fixed or "no release")
                 + f" ({incident.report})")
