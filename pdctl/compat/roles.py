"""Rules across the two roles beyond the handshake's checks: settings prefill and decode must agree on.

SGLang compares page size and KV dtype at the handshake, nothing else; prefill computing the KV with other
weights, another quantization or dtype, or decode expecting a shorter context, are not caught at all.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import facts, incidents, messages

# dests that decide which numbers the KV cache holds: must be equal on both roles
SAME_MODEL = ("model_path", "revision", "quantization", "dtype")  # (kv_cache_dtype: the handshake checks it)


def _differences(ctx: Context, dests: tuple[str, ...]) -> list[str]:
    out = []
    for dest in dests:
        p, d = ctx.pre.values.get(dest), ctx.dec.values.get(dest)
        if p != d:
            out.append(f"--{dest.replace('_', '-')}: prefill {p!r}, decode {d!r}")
    return out


def roles_agree(ctx: Context) -> Outcome:
    """Prefill computes the KV decode attends to: same weights, revision, quantization and dtypes."""
    diffs = _differences(ctx, SAME_MODEL)
    if diffs:
        return fired("prefill and decode run different models or numerics, so decode attends to KV another "
                     "model computed (SGLang does not check this): " + "; ".join(diffs))
    return passed("model, revision, quantization and dtype agree")


def context_length_match(ctx: Context) -> Outcome:
    """A prompt prefill accepts but decode cannot hold fails after its KV was computed and sent."""
    diffs = _differences(ctx, ("context_length",))
    if diffs:
        return fired("prefill and decode allow different context lengths; requests longer than the shorter "
                     "one are prefilled, then fail on decode: " + "; ".join(diffs))
    value = ctx.pre.values.get("context_length")
    return passed(f"context length {value if value is not None else 'from the model'} on both roles")


def _speculative(ctx: Context) -> tuple[object, object]:
    return ctx.pre.get("speculative_algorithm"), ctx.dec.get("speculative_algorithm")


def speculative_prefill_only(ctx: Context) -> Outcome:
    """Prefill with draft-model KV and decode without: decode registers fewer KV regions than prefill sends."""
    p, d = _speculative(ctx)
    if p and not d:
        return fired(f"speculative decoding ({p}) on prefill only: prefill registers the draft model's KV "
                     "regions too and decode has none for them (NIXL: 'decode registered fewer KV regions than "
                     "prefill'); enable it on decode, or on neither")
    return passed("speculative decoding " + (f"{p} on both roles" if p else ("on decode only" if d else "off")))


def speculative_decode_only_version(ctx: Context) -> Outcome:
    """Decode-only speculative decoding is supported since SGLang 0.5.8 (PR #17212); before, wrong answers."""
    p, d = _speculative(ctx)
    if not d or p:
        return passed("not decode-only speculative decoding")
    if not ctx.sglang or ctx.since(facts.SPEC_DECODE_ONLY_SINCE):
        return passed(f"decode-only speculative decoding ({d}) is supported by {ctx.version_words}")
    return fired(f"speculative decoding ({d}) on decode only: {ctx.version_words} writes decode's V cache "
                 f"at the draft model's entries (sglang PR #17212, fixed in {facts.SPEC_DECODE_ONLY_SINCE}): "
                 "wrong answers, no error")


# The speculative algorithms that run eagle_worker_v2's draft (NEXTN is resolved to EAGLE)
EAGLE_ALGORITHMS = frozenset({"EAGLE", "NEXTN"})


def speculative_decode_only_dp_attention(ctx: Context) -> Outcome:
    """Decode-only EAGLE with DP attention on a model whose MTP shares the DSA top-k: decode deadlocks at warm-up."""
    p, d = _speculative(ctx)
    dec = ctx.dec
    if not d or p or str(d).upper() not in EAGLE_ALGORITHMS or dec.attn_dp <= 1:
        return passed("not EAGLE on decode only with DP attention on decode")
    if not ctx.spec.mtp_index_share:
        return passed(f"{ctx.spec.name} does not share its indexer top-k across MTP steps")
    if (dec.get("speculative_eagle_topk") or 1) != 1:  # SGLang shares the top-k only for a topk-1 draft chain
        return passed("speculative_eagle_topk > 1: no MTP top-k sharing")
    incident = incidents.SPEC_DECODE_ONLY_DP_ATTENTION
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no SGLang draft worker")
    if not incident.affects(ctx.eff.version.version):
        return passed(f"{ctx.version_words}: the draft does not switch its CUDA graph on a seeded top-k")
    return fired(messages.spec_decode_only_dp_attention(ctx.spec.name, d, dec.attn_dp, ctx.version_words)
                 + f" ({incident.report})")
