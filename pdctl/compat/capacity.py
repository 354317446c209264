"""KV capacity: what SGLang will have for the KV cache of each role (`max_total_num_tokens`), before launch.

The weights one rank holds (pdctl/models/weights.py: dtype and quantization aware) are subtracted from the
memory SGLang gives its static pool (`mem_fraction_static` of the GPU, SGLang's own default when the
topology does not set it), and the rest is divided by the bytes a token takes in that rank's pools (full and
sliding-window, pdctl/sglang/memory.py; a hybrid linear-attention model gives its mamba state pool its share
first, a DSA model's indexer keys ride on every token). Two field incidents follow from it: weights that leave no room (SGLang
fails at model load, after a multi-node launch) and a pool smaller than one prompt of the context length
(sglang#30233: the prefill refuses the prompt, decode answers from KV it never received). `pdctl status`
reads the real `max_total_num_tokens` of every server and compares it with this estimate.

The reference engine sizes its pool from --max-total-tokens alone (CPU, no GPU memory): its estimate is that,
page-aligned as SGLang aligns it. So does SGLang on a CPU node (`gpu: cpu`): pdctl renders `--max-total-tokens`
there (pdctl/render/cpu.py) and a tiny model's pool is that cap, page-aligned, the SWA pool its ratio of it
(SGLang takes fewer only when mem_fraction_static of the host's memory, less the weights, holds fewer); both
estimates are exact (`KvEstimate.exact`): `pdctl status` flags any difference from the server's pool.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any

from pdctl.compat.context import Context
from pdctl.compat.effective import EffectiveRole
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.models.spec import ModelSpec
from pdctl.sglang import incidents, memory, messages

REFERENCE_POOL_DEFAULT = 8192  # pdctl.reference.args: --max-total-tokens' default
_MODEL_DTYPE_BYTES = 2  # kv_cache_dtype auto = the model's dtype (bf16 for every model pdctl counts)


@dataclass(frozen=True)
class KvEstimate:
    """One role's expected KV pool; `tokens` None with `why` when pdctl cannot estimate it."""

    role: str
    gpu: str | None
    tokens: int | None
    swa_tokens: int | None = None
    context_length: int | None = None
    weights_gib: float | None = None  # one rank's weights
    static_gib: float | None = None  # pre_model_load_memory x mem_fraction_static
    rest_gib: float | None = None  # what is left for the KV pool
    mem_fraction_static: float | None = None
    mem_fraction_source: str | None = None  # "set" | "SGLang's default"
    cell_bytes: float | None = None
    minimum_fraction: float | None = None  # SGLang's "minimum viable" mem_fraction_static
    why: str | None = None
    swa_window: int | None = None  # with page_size, the SWA pool's admission floor (at or below it: nothing fits)
    page_size: int = 1
    exact: bool = False  # the pool is fixed by a flag (reference engine, CPU node): any difference is a disagreement
    kv_bytes: int | None = None  # the pool's bytes on one rank (full + SWA), where the layout is known

    @property
    def no_room(self) -> bool:
        return self.tokens is not None and self.tokens <= 0

    @property
    def swa_too_small(self) -> bool:
        return self.swa_tokens is not None and self.swa_tokens <= (self.swa_window or 0) + self.page_size

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _gpu(ctx_topo: Any, role: EffectiveRole) -> str | None:
    """The role's GPU kind with the least memory (the rank that runs out first)."""
    kinds = {ctx_topo.node(n).gpu for n in role.nodes}
    known = [k for k in kinds if k in memory.GPU_MEMORY_MIB]
    return min(known, key=memory.GPU_MEMORY_MIB.__getitem__) if known else None


def _int(value: Any) -> int | None:
    try:
        return None if value is None else int(value)
    except (TypeError, ValueError):
        return None


def context_length(role: EffectiveRole, spec: ModelSpec) -> int | None:
    """The context length the server serves: --context-length, else the model's max_position_embeddings."""
    return _int(role.values.get("context_length")) or spec.context_length


def estimate(topo: Any, spec: ModelSpec, role: EffectiveRole) -> KvEstimate:
    """ROLE's max_total_num_tokens as SGLang (or the reference engine) will size it."""
    ctx_len = context_length(role, spec)
    page = role.page_size or 1
    user_cap = _int(role.values.get("max_total_tokens"))
    if topo.engine.kind == "reference":
        tokens = (user_cap or REFERENCE_POOL_DEFAULT) // page * page
        return KvEstimate(role.name, None, tokens, context_length=ctx_len,
                          why="the reference engine's pool is --max-total-tokens", exact=True)
    if _cpu_role(topo, role):
        return _cpu_estimate(spec, role, ctx_len, user_cap)
    gpu = _gpu(topo, role)
    if gpu is None:
        return KvEstimate(role.name, None, None, context_length=ctx_len, why="no GPU memory known for its nodes")
    if spec.weights is None:
        return KvEstimate(role.name, gpu, None, context_length=ctx_len,
                          why="the model's weights are not countable here (unknown quantization or shape)")
    gpu_mib = memory.GPU_MEMORY_MIB[gpu]
    shape = memory.ServerShape(mode=str(role.values.get("disaggregation_mode") or "null"), tp=role.tp, pp=role.pp,
                               attn_dp=role.attn_dp, mla=spec.mla, chunked_prefill_size=role.chunked_prefill_size,
                               max_running_requests=_int(role.values.get("max_running_requests")))
    given = role.values.get("mem_fraction_static")
    mfs = float(given) if given is not None else memory.default_mem_fraction_static(gpu_mib, shape)
    pre_gib = gpu_mib / 1024 - memory.CONTEXT_GIB
    weights_gib = spec.weights.bytes_per_rank(tp=role.tp, attn_tp=role.attn_tp,
                                              kv_heads=spec.num_kv_heads) / max(1, role.pp) / memory.GIB
    rest_gib = pre_gib * mfs - weights_gib
    layout = _layout(spec, role)
    common = {"context_length": ctx_len, "weights_gib": round(weights_gib, 2), "static_gib": round(pre_gib * mfs, 2),
              "rest_gib": round(rest_gib, 2), "mem_fraction_static": mfs,
              "mem_fraction_source": "set" if given is not None else "SGLang's default",
              "minimum_fraction": round(weights_gib / pre_gib, 4)}
    if layout is None:
        return KvEstimate(role.name, gpu, None if rest_gib > 0 else 0,
                          why=f"kv_cache_dtype {role.kv_cache_dtype} is not sized here", **common)
    kv_gib = memory.kv_share(rest_gib, spec.hybrid_linear, role.values.get("mamba_full_memory_ratio"))
    sizes = memory.pool_sizes(kv_gib * memory.GIB, layout, page, user_cap)
    return KvEstimate(role.name, gpu, sizes.max_total_num_tokens, sizes.swa_tokens,
                      cell_bytes=round(layout.cell_bytes, 1), swa_window=spec.sliding_window, page_size=page, **common)


CPU_BASIS = "the render's --max-total-tokens on a CPU node"


def _cpu_role(topo: Any, role: EffectiveRole) -> bool:
    return bool(role.nodes) and all(topo.node(n).gpu == "cpu" for n in role.nodes)


def _cpu_estimate(spec: ModelSpec, role: EffectiveRole, ctx_len: int | None, cap: int | None) -> KvEstimate:
    """A CPU node's pool: the render's --max-total-tokens (pdctl.render.cpu), page-aligned, the SWA pool its
    ratio of it, as SGLang's HybridSWAPoolConfigurator solves it from a token count."""
    if cap is None:
        return KvEstimate(role.name, "cpu", None, context_length=ctx_len,
                          why="a CPU node without --max-total-tokens: its pool is a share of the host's memory")
    layout = _layout(spec, role)
    if layout is None:
        return KvEstimate(role.name, "cpu", None, context_length=ctx_len,
                          why=f"kv_cache_dtype {role.kv_cache_dtype} is not sized here")
    page = role.page_size or 1
    sizes = memory.fixed_pool_sizes(cap, layout, page)
    kv_bytes = sizes.max_total_num_tokens * layout.full_bytes + (sizes.swa_tokens or 0) * layout.swa_bytes
    return KvEstimate(role.name, "cpu", sizes.max_total_num_tokens, sizes.swa_tokens, context_length=ctx_len,
                      cell_bytes=round(layout.cell_bytes, 1), why=CPU_BASIS, swa_window=spec.sliding_window,
                      page_size=page, exact=True, kv_bytes=int(kv_bytes))


def _layout(spec: ModelSpec, role: EffectiveRole) -> memory.KvLayout | None:
    """The pool geometry of one rank of ROLE (its PP stage holds num_layers / pp layers)."""
    element = memory.KV_ELEMENT_BYTES.get(role.kv_cache_dtype)
    if role.kv_cache_dtype == "auto":
        element = _MODEL_DTYPE_BYTES
    if element is None:
        return None
    pp = max(1, role.pp)
    hybrid = spec.hybrid_swa and role.hybrid_swa_memory
    full = len(spec.full_layers) if hybrid else len(spec.kv_layers)  # linear-attention layers hold no KV
    swa = len(spec.swa_layers) if hybrid else 0
    ratio = float(role.values.get("swa_full_tokens_ratio") or memory.SWA_FULL_TOKENS_RATIO)
    mla_dim = spec.kv_elems_per_token() if spec.mla else None
    layout = memory.kv_layout(kv_heads=spec.num_kv_heads, head_dim=spec.head_dim, attn_tp=role.attn_tp,
                              full_layers=-(-full // pp), swa_layers=-(-swa // pp), element_bytes=element,
                              mxfp8=role.kv_cache_dtype == "mxfp8", mla_dim=mla_dim, swa_ratio=ratio)
    # DSA: the indexer's key cache sits next to every token's latent (DSATokenToKVPool.get_kv_size_bytes)
    return replace(layout, full_bytes=layout.full_bytes + spec.indexer_bytes_per_token() / pp)


def estimates(ctx: Context) -> list[KvEstimate]:
    return [estimate(ctx.topo, ctx.spec, role) for role in ctx.roles()]


def _words(e: KvEstimate) -> str:
    return (f"{e.role} on {e.gpu}: {e.weights_gib:g} GiB of weights per GPU, {e.static_gib:g} GiB static pool "
            f"(mem_fraction_static {e.mem_fraction_static:g}, {e.mem_fraction_source})")


def kv_capacity(ctx: Context) -> Outcome:
    """Weights that leave no KV pool fail SGLang at model load, after the whole launch."""
    found = estimates(ctx)
    bad = [e for e in found if e.no_room]
    tiny = [e for e in found if not e.no_room and e.swa_too_small]
    if tiny and not bad:
        return fired("; ".join(f"{_words(e)}: SGLang: "
                               + messages.swa_pool_too_small(e.swa_tokens or 0, e.swa_window or 0, e.page_size)
                               for e in tiny))
    if bad:
        parts = []
        for e in bad:
            assert e.mem_fraction_static is not None and e.minimum_fraction is not None
            said = (messages.kv_no_room(e.mem_fraction_static, e.minimum_fraction)
                    if ctx.sglang and ctx.since(incidents.KV_NO_ROOM_MESSAGE_SINCE) and (e.rest_gib or 0) <= 0
                    else messages.not_enough_memory(e.mem_fraction_static))
            hopeless = " (the weights alone exceed the GPU: more TP/EP or a larger GPU)" if e.minimum_fraction >= 1 else ""
            parts.append(f"{_words(e)}, {e.rest_gib:g} GiB left for KV{hopeless}. SGLang: {said}")
        return fired("; ".join(parts))
    known = [e for e in found if e.tokens is not None]
    if not known:
        return passed("not estimated: " + "; ".join(f"{e.role}: {e.why}" for e in found))
    cpu = [e.gpu == "cpu" for e in known]
    basis = CPU_BASIS if all(cpu) else f"estimate; CPU nodes: {CPU_BASIS}" if any(cpu) else "estimate"
    return passed(", ".join(_tokens_words(e) for e in known) + f" of KV per rank ({basis})")


def size_words(n_bytes: float) -> str:
    """Bytes in MiB below a GiB, else GiB."""
    return f"{n_bytes / memory.GIB:.2f} GiB" if n_bytes >= memory.GIB else f"{n_bytes / (1 << 20):.2f} MiB"


def _tokens_words(e: KvEstimate) -> str:
    if e.gpu != "cpu":
        return f"{e.role} ~{e.tokens:,} tokens"
    swa = f", SWA {e.swa_tokens:,}" if e.swa_tokens is not None else ""
    return f"{e.role} {e.tokens:,} tokens{swa} ({size_words(e.kv_bytes or 0)})"


def kv_capacity_context(ctx: Context) -> Outcome:
    """A pool smaller than one prompt of the context length: such prompts are refused on prefill, and in PD
    the decode side still answers them from KV it never received (sglang#30233, no released fix)."""
    short = [e for e in estimates(ctx) if e.tokens and e.context_length and e.tokens < e.context_length]
    if short:
        words = "; ".join(f"{e.role}: {messages.kv_below_context(e.tokens or 0, e.context_length or 0)}"
                          for e in short)
        if ctx.sglang and not ctx.since(incidents.KV_BELOW_CONTEXT_WARNING_SINCE):
            words += f" ({ctx.version_words} starts without this warning: it first ships in 0.5.23.)"
        return fired(f"{words} In PD a prompt the prefill refuses still reaches decode as a one-token transfer and "
                     f"decode answers from KV it never received ({incidents.ABORTED_PREFILL_GARBAGE.report}, "
                     f"{incidents.ABORTED_PREFILL_GARBAGE.releases})")
    known = [e for e in estimates(ctx) if e.tokens and e.context_length]
    if not known:
        return passed("not estimated")
    return passed(", ".join(f"{e.role} holds {e.tokens / (e.context_length or 1):.1f} x context {e.context_length}"
                            for e in known))
