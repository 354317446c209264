"""Rules of the per-request state components SGLang's PD transfer sends besides the KV pages: the mamba state of
hybrid linear-attention models (Qwen3-Next, Qwen3.5) and the indexer keys of DSA models (DeepSeek-V3.2).

Which release of which backend sends them, and with unequal attention TP, is read off the wheels
(pdctl/sglang/facts.py: STATE_TRANSFER_NIXL_SINCE, MAMBA_HETERO_TP_SINCE).
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import facts, messages


def _states(ctx: Context) -> list[str]:
    out = []
    if ctx.spec.hybrid_linear:
        out.append(f"mamba state of {len(ctx.spec.linear_layers)} linear-attention layers")
    if ctx.spec.dsa:
        out.append("DSA indexer keys")
    return out


def state_transfer_backend(ctx: Context) -> Outcome:
    """NIXL before 0.5.9 drops the state indices: decode's linear layers / indexer start from nothing."""
    states = _states(ctx)
    if not states:
        return passed("model has no per-request state besides its KV pages")
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no SGLang transfer code")
    if ctx.backend != "nixl" or ctx.since(facts.STATE_TRANSFER_NIXL_SINCE):
        return passed(f"{ctx.backend} on {ctx.version_words} sends the {' and the '.join(states)}")
    return fired(f"{ctx.version_words} over NIXL does not send the {' and the '.join(states)}: its NixlKVSender "
                 f"takes the state indices and drops them (state transfer arrived in "
                 f"{facts.STATE_TRANSFER_NIXL_SINCE}); SGLang says nothing and decode answers from a state it "
                 "never received")


def mamba_hetero_tp(ctx: Context) -> Outcome:
    """Unequal attention TP with a hybrid linear-attention model: refused before the per-rank state slicing."""
    if not ctx.spec.hybrid_linear:
        return passed("model has no linear-attention layers")
    if not ctx.unequal:
        return passed(f"equal attention TP ({ctx.pre.attn_tp}): the mamba state moves whole slot to slot")
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: no SGLang transfer code")
    since = facts.MAMBA_HETERO_TP_SINCE.get(ctx.backend)
    if since is None or ctx.since(since):
        return passed(f"{ctx.backend} on {ctx.version_words} slices the mamba state per rank "
                      f"(prefill attention TP {ctx.pre.attn_tp} -> decode {ctx.dec.attn_tp})")
    if ctx.backend == "nixl":
        if not ctx.since(facts.STATE_TRANSFER_NIXL_SINCE):
            return passed("no state transfer at all on this release: the state-transfer-backend rule says so")
        said = messages.NIXL_MAMBA_HETERO_TP
    else:
        said = messages.hybrid_state_hetero_tp("SWA", ctx.eff.version.parsed) or (
            "no refusal: the mamba state is sent whole to a rank of another TP")
    return fired(f"{said} ({ctx.version_words}, {ctx.backend}, attention TP {ctx.pre.attn_tp} -> "
                 f"{ctx.dec.attn_tp}; the per-rank state slice arrived in {since}: "
                 f"{facts.MAMBA_HETERO_TP_PR[ctx.backend]})")
