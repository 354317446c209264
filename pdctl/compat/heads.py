"""Rules about how KV heads split over attention-TP ranks, and map between prefill and decode TP sizes.

Model load asserts that every rank holds whole heads. Between roles, SGLang's handshake accepts shapes its
later code cannot carry: a TP ratio that is not whole (rank mapping to ranks that do not exist), NIXL's
prepared dlists when prefill TP already replicates heads, and releases whose head map for replicated heads
was wrong (sglang#23746). Those fail late (registration, first transfer) or silently, so pdctl fails them now.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.plan.heads import prefill_peers, ratio_ok
from pdctl.sglang import facts, messages


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
    """SGLang maps decode rank d to prefill rank d // (d_tp // p_tp) (or a range): the ratio must be whole.
    Where it fails (measured on SGLang's own stack): a decode rank mapped to a prefill rank that does not exist
    fails its registration ("Could not fetch bootstrap info"); otherwise some prefill rank is never paired and
    its request waits out the first transfer."""
    p, d = ctx.pre.attn_tp, ctx.dec.attn_tp
    if not ratio_ok(p, d):
        missing = any(t >= p for r in range(d) for t in prefill_peers(p, d, r))
        return fired(messages.attn_tp_ratio(p, d), None if missing else "first transfer")
    return passed(f"attention TP {p} -> {d}" + ("" if p == d else f" (ratio {max(p, d) // min(p, d)})"))


def nixl_head_groups(prefill_tp: int, decode_tp: int, kv_heads: int) -> tuple[int, bool]:
    """(num_groups, tiles): the head groups NIXL's `_init_hetero_tp_prep_handle` interleaves per token when
    decode TP is larger, and whether they tile a prefill page as its assertion demands
    (`page_size * num_groups * bytes_per_token_to_send == src_kv_item_len`)."""
    if prefill_tp >= decode_tp:
        return 1, True  # one group of all the prefill rank's heads
    groups = decode_tp // prefill_tp // max(1, decode_tp // kv_heads)
    return groups, groups * max(1, kv_heads // decode_tp) == max(1, kv_heads // prefill_tp)


def nixl_tp_over_heads(ctx: Context) -> Outcome:
    """NIXL's hetero-TP dlists interleave decode_tp // prefill_tp // replication head groups per token; when
    they do not tile a prefill page (0 groups when prefill TP already exceeds the KV heads and decode TP is
    larger still; or a TP ratio that is not whole) the decode registration fails its assertion."""
    if ctx.backend != "nixl":
        return passed(f"backend {ctx.backend}: no NIXL prepared dlists")
    if ctx.mla:
        return passed("MLA model: one latent, no head groups")
    p, d, h = ctx.pre.attn_tp, ctx.dec.attn_tp, ctx.kv_heads
    groups, tiles = nixl_head_groups(p, d, h)
    if not tiles:
        return fired(messages.nixl_prep_groups(p, d, h, groups))
    return passed(f"attention TP {p} -> {d} with {h} KV heads: NIXL head groups tile the pages")


def nixl_hetero_tp_host_memory(ctx: Context) -> Outcome:
    """SGLang's NIXL manager refuses heterogeneous TP when the decode's KV is host memory (a CPU node's
    server: pdctl.sglang_cpu labels its KV DRAM, as it is). Measured on real SGLang servers on CPU (TP2 -> TP1,
    TP1 -> TP2): the refusal happens at the first transfer, in the prefill's bootstrap thread."""
    if not ctx.sglang or ctx.backend != "nixl" or not ctx.unequal:
        return passed("not NIXL with unequal TP on SGLang")
    hosts = [n for n in ctx.dec.nodes if ctx.topo.node(n).gpu == "cpu"]
    if not hosts:
        return passed("decode KV is GPU memory (VRAM)")
    return fired(f"prefill attention TP {ctx.pre.attn_tp} -> decode {ctx.dec.attn_tp} over NIXL into host memory "
                 f"(decode on CPU node(s) {', '.join(hosts)}): {messages.NIXL_HETERO_TP_HOST} "
                 "(nixl/conn.py _prepare_payload_xfer; the request then waits out the bootstrap timeout)")


def gqa_replication_version(ctx: Context) -> Outcome:
    """Releases before the replicated-head fix map decode ranks to heads by modulo (sglang#23746)."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: implements the fixed head map")
    if ctx.mla or not ctx.unequal or ctx.dec.attn_tp <= ctx.kv_heads:
        return passed("no replicated KV heads on a head-sliced transfer")
    since = facts.GQA_REPLICATED_HEADS_SINCE.get(ctx.backend)
    if since is None or ctx.since(since):
        return passed(f"{ctx.version_words} maps replicated heads correctly over {ctx.backend}")
    return fired(
        f"decode attention TP {ctx.dec.attn_tp} > {ctx.kv_heads} KV heads with prefill attention TP "
        f"{ctx.pre.attn_tp}: {ctx.version_words} maps decode ranks to KV heads by modulo over {ctx.backend} "
        f"(sglang#23746, fixed in {since}), so replicated ranks receive the wrong head: wrong answers, no error"
    )
