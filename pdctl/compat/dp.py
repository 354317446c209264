"""Data-parallel field incidents: DP attention that corrupts a model's output, and DP routing that prefill,
decode and the router do not agree on.

Both are releases-and-settings facts (pdctl/sglang/incidents.py): SGLang accepts the command lines, then
answers wrongly (the MoE output reduced twice, sglang#37187 / #31699) or fails each request whose
bootstrap room does not map to the DP rank that served it (sglang#29725, router --dp-aware in PD mode).
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.effective import EffectiveRole
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import incidents, messages
from pdctl.sglang.versions import at_least, release

# model_type values that run gpt_oss.py / deepseek_v4.py in SGLang
GPT_OSS_TYPES = frozenset({"gpt_oss"})
DEEPSEEK_V4_TYPES = frozenset({"deepseek_v4"})
FOLLOW_ROOM = "follow_bootstrap_room"


def _a2a_none(role: EffectiveRole) -> bool:
    return str(role.get("moe_a2a_backend", "none")) == "none"


def _ep(role: EffectiveRole) -> int:
    return int(role.get("ep_size", 1) or 1)


def _double_reduce(ctx: Context, role: EffectiveRole) -> bool:
    """gpt_oss.py's TP all-reduce plus DP attention's reduce_scatterv (should_use_dp_reduce_scatterv)."""
    if role.attn_dp <= 1 or not _a2a_none(role) or _ep(role) != role.attn_dp:
        return False
    if at_least(ctx.eff.version, "0.5.19") and role.tp != role.attn_dp:  # 0.5.19 added `tp == attn_dp`
        return False
    return incidents.GPT_OSS_DP_ATTENTION.affects(ctx.eff.version.version)


def _replicated_gather(ctx: Context, role: EffectiveRole) -> bool:
    """deepseek_v4.py's dp_gather_partial over hidden states replicated across attention TP."""
    return (role.attn_dp > 1 and role.attn_tp > 1 and _a2a_none(role)
            and incidents.DEEPSEEK_V4_DP_ATTENTION.affects(ctx.eff.version.version))


def dp_attention_corruption(ctx: Context) -> Outcome:
    """DP attention on a model/release whose MoE combine double-counts: silent garbage (sglang#37187, #31699)."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no DP attention")
    mtype = ctx.spec.model_type or ""
    bad = []
    for role in ctx.roles():
        if mtype in GPT_OSS_TYPES and _double_reduce(ctx, role):
            fixed = incidents.GPT_OSS_DP_ATTENTION.fixed or "no release"
            bad.append(messages.dp_attention_double_reduce(ctx.spec.name, role.name, role.tp, role.attn_dp, _ep(role),
                                                           ctx.version_words, fixed)
                       + f" ({incidents.GPT_OSS_DP_ATTENTION.report})")
        elif mtype in DEEPSEEK_V4_TYPES and _replicated_gather(ctx, role):
            fixed = incidents.DEEPSEEK_V4_DP_ATTENTION.fixed or "no release"
            bad.append(messages.dp_attention_replicated_gather(ctx.spec.name, role.name, role.attn_tp,
                                                               ctx.version_words, fixed)
                       + f" ({incidents.DEEPSEEK_V4_DP_ATTENTION.report})")
    if bad:
        return fired("; ".join(bad))
    dpa = [r.name for r in ctx.roles() if r.attn_dp > 1]
    if not dpa:
        return passed("no DP attention")
    return passed(f"DP attention on {', '.join(dpa)}: no known corruption for {mtype or ctx.spec.name} on "
                  f"{ctx.version_words}")


def _plain_dp(role: EffectiveRole) -> bool:
    """--dp-size > 1 as separate DP replicas inside one server (no DP attention)."""
    return role.dp > 1 and role.attn_dp <= 1


def _load_balance(role: EffectiveRole) -> str:
    """--load-balance-method as SGLang resolves it: auto is follow_bootstrap_room on a PD prefill (PR #16110)."""
    method = str(role.get("load_balance_method", "auto"))
    return FOLLOW_ROOM if method == "auto" and role.name == "prefill" else method


def _router_dp_aware(ctx: Context) -> bool:
    value = ctx.topo.router.args.get("dp-aware")
    return value not in (None, False, "false", "False", 0)


def dp_routing(ctx: Context) -> Outcome:
    """Prefill's DP dispatch, decode's idea of which prefill DP rank holds a request, and the router agree."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no data parallelism")
    pre = ctx.pre
    prefill_dp = max(pre.dp, pre.attn_dp)
    force_query = str(pre.env.get("SGLANG_DISAGGREGATION_FORCE_QUERY_PREFILL_DP_RANK", "")).lower() in ("1", "true")
    bad: list[str] = []
    if _router_dp_aware(ctx):  # broken whatever the DP sizes (dp_size 1 registers `@0` workers)
        bad.append(f"router --dp-aware in PD mode: sglang-router {incidents.ROUTER_TESTED} registers each DP rank as "
                   "`http://host:port@rank` and sends requests to that string, which HTTP reads as host `rank`: "
                   "no request reaches a worker (SGLang's own DP dispatch by bootstrap room needs no router "
                   f"help; cf. {incidents.ROUTER_DP_AWARE_PD.report})")
    if _plain_dp(pre) and incidents.PLAIN_DP_PREFILL.affects(ctx.eff.version.version):
        example = messages.follow_room_conflict(0, 5560925207985320907, 5560925207985320907 % pre.dp)
        bad.append(f"prefill --dp-size {pre.dp} without DP attention on {ctx.version_words}: its KV sender compares "
                   f"the attention DP rank (0 in every DP replica) with bootstrap_room % {pre.dp} and fails the "
                   f"requests of the other {pre.dp - 1} replica(s) at bootstrap: '{example}' "
                   f"({incidents.PLAIN_DP_PREFILL.report}; fix {incidents.PLAIN_DP_PREFILL.fix} is in no release)")
    method = _load_balance(pre)
    if (prefill_dp > 1 and method != FOLLOW_ROOM and not force_query
            and ctx.eff.version.parsed < release(incidents.DP_RANK_QUERY_SINCE)):
        bad.append(f"prefill --load-balance-method {method} with {prefill_dp} DP ranks on {ctx.version_words}: "
                   f"decode assumes bootstrap_room % {prefill_dp} (prefill registers its DP rank with the bootstrap "
                   f"server only from SGLang {incidents.DP_RANK_QUERY_SINCE}), so it waits for KV on a DP rank "
                   "that never prefilled the request")
    if bad:
        return fired("; ".join(bad))
    if prefill_dp <= 1:
        return passed("prefill has one DP rank: decode finds it without DP routing")
    return passed(f"prefill {prefill_dp} DP ranks dispatched by {method}; decode resolves the rank "
                  + ("by bootstrap_room" if method == FOLLOW_ROOM and not force_query else "from the bootstrap server"))
