"""Decode KV offload (`--disaggregation-decode-enable-offload-kvcache`) as SGLang's start-up resolution judges it.

SGLang's `arg_groups/kv_cache_hook.py` refuses the flag without a HiCache storage backend, and together with
`--disaggregation-decode-retraction-backup host_pool` (both build a decode host pool). Found by the start-up
differential (tests/sglang/test_resolution.py): pdctl passed both, SGLang refused them. Release ranges, read off
the wheels: the storage check is in 0.5.12 and 0.5.16-0.5.23 (server_args.py, then kv_cache_hook.py), not in
0.5.8 (0.5.9-0.5.11 unread: judged with it, a false alarm there is better than a false pass); the host-pool
exclusion is in 0.5.18-0.5.23, where the retraction-backup flag appeared.

With the decode radix cache too, SGLang starts, serves one request, then exits (a field incident, sglang#27666:
pdctl/sglang/incidents.py says what the wheels show).
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import incidents, messages

STORAGE_SINCE = "0.5.9"  # the first release after 0.5.8, which has no such check
HOST_POOL_SINCE = "0.5.18"  # the flag's first release


def _offloading(ctx: Context) -> list:
    return [r for r in ctx.roles() if r.get("disaggregation_decode_enable_offload_kvcache", False)]


def offload_kvcache_storage(ctx: Context) -> Outcome:
    """Offload writes decode's KV to the HiCache storage backend: without one SGLang refuses to start."""
    roles = _offloading(ctx)
    if not roles or not ctx.sglang or not ctx.since(STORAGE_SINCE):
        return passed("decode KV offload off")
    bad = [r.name for r in roles if r.get("hicache_storage_backend") is None]
    if bad:
        return fired(f"{bad[0]}: {messages.OFFLOAD_KVCACHE_NEEDS_STORAGE}")
    return passed("decode KV offload with a HiCache storage backend")


def offload_kvcache_host_pool(ctx: Context) -> Outcome:
    """Offload and the host-pool retraction backup both build a decode host pool: SGLang refuses the pair."""
    roles = _offloading(ctx)
    if not roles or not ctx.sglang or not ctx.since(HOST_POOL_SINCE):
        return passed("decode KV offload off")
    bad = [r.name for r in roles if r.get("disaggregation_decode_retraction_backup") == "host_pool"]
    if bad:
        return fired(f"{bad[0]}: {messages.OFFLOAD_KVCACHE_HOST_POOL}")
    return passed("decode KV offload without the host-pool retraction backup")


def decode_radix_offload(ctx: Context) -> Outcome:
    """Offload + the decode radix cache: the offload manager's release double-frees the tree's prefix slots."""
    roles = [r for r in _offloading(ctx) if r.radix_cache]
    incident = incidents.DECODE_RADIX_OFFLOAD
    if not roles:
        return passed("no decode runs both the radix cache and KV offload")
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no SGLang decode")
    if not incident.affects(ctx.eff.version.version):
        return passed(f"decode radix cache with KV offload: {ctx.version_words} releases a finished request's "
                      "prefix through the radix tree")
    return fired(messages.decode_radix_offload(roles[0].name, ctx.version_words, incident.fixed) +
                 f" ({incident.report})")
