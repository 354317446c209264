"""Decode KV offload (`--disaggregation-decode-enable-offload-kvcache`) as SGLang's start-up resolution judges it.

SGLang's `arg_groups/kv_cache_hook.py` refuses the flag without a HiCache storage backend, and together with
`--disaggregation-decode-retraction-backup host_pool` (both build a decode host pool). Found by the start-up
differential (tests/sglang/test_resolution.py): pdctl passed both, SGLang refused them. Release ranges, read off
the wheels: the storage check is in 0.5.12 and 0.5.16-0.5.23 (server_args.py, then kv_cache_hook.py), not in
0.5.8 (0.5.9-0.5.11 unread: judged with it, a false alarm there is better than a false pass); the host-pool
exclusion is in 0.5.18-0.5.23, where the retraction-backup flag appeared.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import messages

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
