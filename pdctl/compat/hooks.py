"""Start-up refusals of SGLang's argument resolution that the start-up differential found (tests/sglang/
test_resolution.py, the widened generator): check-compat passed these command lines, SGLang refused them.

The first two raise sites read off every covered wheel (0.5.16-0.5.23, server_args.py then arg_groups/): the expert
load balancer asserts an expert-parallel size above 1 (`enable_eplb and ep_join_mode != "scale"` ->
`assert ep_size > 1`, parallel_hook.py in 0.5.23, a bare assert: SGLang prints no words), and HiCache refuses a
disabled radix cache (kv_cache_hook.py) — which is what decode has unless
`--disaggregation-decode-enable-radix-cache` (SGLang disables decode's radix cache in PD). Both are judged on
every release: older ones were not read, and a false alarm there is better than a false pass.
Decode's radix cache with speculative decoding: refused for every algorithm in 0.5.16-0.5.20
(pd_disaggregation_hook.py), for all but DSPARK in 0.5.21-0.5.22, and in 0.5.23 (speculative_hook.py, on the
final algorithm: NEXTN aliases EAGLE) for all but DSPARK, EAGLE, EAGLE3 — read off the wheels and checked
against each release's own resolution. HiSparse (hisparse_hook.py, 0.5.16-0.5.23) asserts a DSA model
(config.json's `index_topk`), DeepSeek V4, or (since 0.5.21) MiniMax M3, and refuses it with decode's radix
cache (pd_disaggregation_hook.py, every release). Pipeline parallelism with speculative
decoding (validation: server_args.py, then validation_hook.py): refused for every algorithm on 0.5.16-0.5.20 (off
NPU), for all but EAGLE (NEXTN is EAGLE by then; DSPARK on prefill) from 0.5.21, and EAGLE itself only on a PD
prefill from 0.5.21 (validation_hook.py: "PP + speculative decoding (MTP) is only supported on prefill nodes").
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.effective import EffectiveRole
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import messages
from pdctl.sglang.settings import env_bool


def eplb_ep_size(ctx: Context) -> Outcome:
    """--enable-eplb balances experts across EP ranks: with an EP size of 1 SGLang's resolution asserts."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no EPLB")
    bad = [r for r in ctx.roles() if r.get("enable_eplb", False) and str(r.get("ep_join_mode", "")) != "scale"
           and int(r.get("ep_size", 1) or 1) <= 1]
    if bad:
        return fired(f"{bad[0].name}: {messages.EPLB_NEEDS_EP}")
    return passed("EPLB off, or with ep-size > 1")


def _radix_off(role: EffectiveRole) -> bool:
    if role.get("disable_radix_cache", False):
        return True
    return role.name == "decode" and not role.get("disaggregation_decode_enable_radix_cache", False)


def hicache_radix(ctx: Context) -> Outcome:
    """HiCache extends the radix cache: on a role whose radix cache is off SGLang refuses to start."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no HiCache")
    bad = [r.name for r in ctx.roles() if r.get("enable_hierarchical_cache", False) and _radix_off(r)]
    if bad:
        return fired(f"{bad[0]}: {messages.HICACHE_NEEDS_RADIX}")
    return passed("HiCache off, or on a role with its radix cache")


# (first release, the speculative algorithms decode may run with its radix cache), newest first.
SPEC_WITH_DECODE_RADIX: tuple[tuple[str, frozenset[str]], ...] = (
    ("0.5.23", frozenset({"DSPARK", "EAGLE", "EAGLE3", "NEXTN"})),
    ("0.5.21", frozenset({"DSPARK"})),
)


def _spec_allowed(ctx: Context) -> frozenset[str]:
    return next((algos for since, algos in SPEC_WITH_DECODE_RADIX if ctx.since(since)), frozenset())


def speculative_decode_radix(ctx: Context) -> Outcome:
    """Decode's radix cache with a speculative algorithm the release does not allow there: refused at start-up."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no speculative decoding")
    for r in ctx.roles():
        algo = r.get("speculative_algorithm")
        if r.name == "decode" and algo and r.get("disaggregation_decode_enable_radix_cache", False) \
                and str(algo).upper() not in _spec_allowed(ctx):
            return fired(f"decode: {messages.spec_decode_radix(str(algo))} ({ctx.version_words})")
    return passed("decode's radix cache without a speculative algorithm it excludes")


HISPARSE_MINIMAX_SINCE = "0.5.21"


def hisparse_model(ctx: Context) -> Outcome:
    """--enable-hisparse runs on DSA models, DeepSeek V4 and (0.5.21+) MiniMax M3 only: SGLang asserts so."""
    if not ctx.sglang or not any(r.get("enable_hisparse", False) for r in ctx.roles()):
        return passed("HiSparse off")
    mtype = str(ctx.spec.model_type or "")
    minimax = ctx.since(HISPARSE_MINIMAX_SINCE)
    if ctx.spec.dsa or mtype.startswith("deepseek_v4") or (minimax and mtype.startswith("minimax")):
        return passed(f"HiSparse on a model it supports ({mtype or ctx.spec.name})")
    return fired(f"{messages.hisparse_model(minimax)}(model_type {mtype or '?'}; {ctx.version_words})")


def hisparse_decode_radix(ctx: Context) -> Outcome:
    """HiSparse on decode with decode's radix cache: refused at start-up, whatever the model."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no HiSparse")
    bad = [r for r in ctx.roles() if r.name == "decode" and r.get("enable_hisparse", False)
           and r.get("disaggregation_decode_enable_radix_cache", False)]
    if bad:
        return fired(f"decode: {messages.HISPARSE_DECODE_RADIX}")
    return passed("no HiSparse with decode's radix cache")


PP_EAGLE_SINCE = "0.5.21"


def _pp_spec_refused(ctx: Context, role: EffectiveRole) -> str | None:
    algo = role.get("speculative_algorithm")
    if int(role.get("pp_size", 1) or 1) <= 1 or not algo:
        return None
    if not ctx.since(PP_EAGLE_SINCE):
        return messages.PP_NO_SPECULATIVE
    algo = str(algo).upper()
    if algo in ("EAGLE", "NEXTN") and not role.get("enable_multi_layer_eagle", False):
        return _pp_spec_mode(role)
    if algo == "DSPARK" and role.name == "prefill":
        return None
    return messages.PP_EAGLE_ONLY


def _pp_spec_mode(role: EffectiveRole) -> str | None:
    """0.5.21+: PP with EAGLE runs on a PD prefill; with SGLANG_ENABLE_PP_SPEC, on a colocated server only."""
    if env_bool(role.env, "SGLANG_ENABLE_PP_SPEC"):
        return messages.PP_SPEC_ENV_PD if role.name in ("prefill", "decode") else None
    return None if role.name == "prefill" else messages.PP_MTP_PREFILL_ONLY


def pp_speculative(ctx: Context) -> Outcome:
    """PP with speculative decoding: none before 0.5.21, then EAGLE (single-layer) only."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no PP")
    for role in ctx.roles():
        said = _pp_spec_refused(ctx, role)
        if said:
            return fired(f"{role.name}: {said} ({ctx.version_words})")
    return passed("no pipeline parallelism with a speculative algorithm the release refuses")
