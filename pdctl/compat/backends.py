"""Start-up refusals that read the attention backend SGLang resolves (pdctl/sglang/attention.py predicts it per
GPU, model and release), found by the start-up differential (tests/sglang/test_resolution.py).

Read off every covered wheel (0.5.16-0.5.23; the raise sites are the same code in each, arg_groups/overrides.py and
arg_groups/speculative_hook.py):
- trtllm_mla (named, or SGLang's own choice for DeepSeek V3 on Blackwell) refuses a GPU before Blackwell and any
  KV dtype but fp8_e4m3 / bf16 / auto (and fp4_e2m1 before 0.5.21);
- trtllm_mha as the prefill backend (of either PD role: a server resolves both) on Hopper before 0.5.19
  (server_args.py: "only supported on Blackwell"; SM90 joined with the hooks in 0.5.19);
- a tree draft (EAGLE / EAGLE3 / NEXTN / STANDALONE with top-k > 1) on pages (page size > 1 after the backend's
  own page snap) needs flashinfer, fa3 or triton; with trtllm_mha anywhere it needs top-k 1;
- NGRAM (its top-k is its BFS breadth, 10 by default) on pages needs flashinfer, and refuses DP attention.
- a DSA model (DeepSeek V3.2) refuses any KV dtype but auto / bf16 / bfloat16 / fp8_e4m3 (overrides.py's DSA
  KV pass, every release);
- a hybrid linear-attention model (Qwen3-Next) whose radix cache runs with --mamba-radix-cache-strategy
  no_buffer needs page size 1, no overlap schedule, no trtllm_mha (mamba_hook.py; server_args.py before 0.5.19).
Where the backend cannot be predicted (GPUs other than Hopper / SM100) these rules say nothing rather than guess.
"""

from __future__ import annotations

from pdctl.compat.context import BLACKWELL, HOPPER, Context
from pdctl.compat.effective import EffectiveRole
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import facts, messages
from pdctl.sglang.attention import SM90, SM100, Resolved, resolve

FP4_TRTLLM_MLA_UNTIL = "0.5.21"  # fp4_e2m1 left trtllm_mla's KV dtypes then
TRTLLM_MHA_PREFILL_SM90_SINCE = "0.5.19"
TRTLLM_MLA_DTYPES = ("fp8_e4m3", "bf16", "auto")
EAGLE_FAMILY = frozenset({"EAGLE", "EAGLE3", "NEXTN", "STANDALONE"})
TREE_PAGE_BACKENDS = ("flashinfer", "fa3", "triton")  # speculative_hook.py's _PAGE_TREE_SPEC_BACKENDS
# _auto_choose_speculative_params: (steps, top-k, draft tokens) when EAGLE's are not given; Llama's top-k is 4
AUTO_TOPK = {"llama": 4}


def _arch(kind: str) -> str | None:
    return SM90 if kind in HOPPER else SM100 if kind in BLACKWELL else None


def _resolved(ctx: Context, role: EffectiveRole) -> list[tuple[str, Resolved]]:
    """(GPU kind, what SGLang resolves there) for each GPU kind of ROLE the prediction covers."""
    out = []
    dsa_page = None
    if ctx.spec.dsa:
        dsa_page = facts.DSA_PAGE * (ctx.spec.index_kpool if ctx.since(facts.DSA_PAGE_KPOOL_SINCE) else 1)
    for kind in ctx.gpu_kinds(role):
        got = resolve(ctx.eff.version.parsed, _arch(kind), ctx.mla, ctx.spec.model_type, dsa_page, role.values)
        if got is not None:
            out.append((kind, got))
    return out


def _backend_words(res: Resolved, kind: str) -> str:
    return f"attention backend {res.attention_backend} on {kind}" + ("" if res.why == "set" else f": {res.why}")


def _backend_refusal(ctx: Context, role: EffectiveRole, kind: str, res: Resolved) -> str | None:
    prefill = res.prefill_attention_backend or res.attention_backend
    if prefill == "trtllm_mha" and kind not in BLACKWELL and not ctx.since(TRTLLM_MHA_PREFILL_SM90_SINCE):
        return messages.TRTLLM_MHA_PREFILL_BLACKWELL
    if "trtllm_mla" not in (res.attention_backend, res.decode_attention_backend):
        return None
    if kind not in BLACKWELL:
        return messages.TRTLLM_MLA_NEEDS_BLACKWELL
    fp4 = not ctx.since(FP4_TRTLLM_MLA_UNTIL)
    if role.kv_cache_dtype not in TRTLLM_MLA_DTYPES + (("fp4_e2m1",) if fp4 else ()):
        return messages.trtllm_mla_kv_dtype(fp4)
    return None


def attention_backend_args(ctx: Context) -> Outcome:
    """trtllm_mla, named or chosen by SGLang, on a GPU or with a KV dtype it refuses at start-up; trtllm_mha
    prefill on Hopper before 0.5.19."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}")
    for role in ctx.roles():
        for kind, res in _resolved(ctx, role):
            said = _backend_refusal(ctx, role, kind, res)
            if said:
                return fired(f"{role.name}: {said} ({_backend_words(res, kind)}, kv_cache_dtype "
                             f"{role.kv_cache_dtype}; {ctx.version_words})")
    return passed("the resolved attention backends take these GPUs and KV dtypes at start-up")


def _topk(ctx: Context, role: EffectiveRole, algorithm: str) -> int | None:
    """The top-k the speculative hook judges: NGRAM's BFS breadth; EAGLE's own, or its auto-chosen one."""
    if algorithm == "NGRAM":
        return int(role.get("speculative_ngram_max_bfs_breadth", 10))
    topk = role.values.get("speculative_eagle_topk")
    if topk is None and role.values.get("speculative_num_steps") is None:
        return AUTO_TOPK.get(str(ctx.spec.model_type or ""), 1)
    return None if topk is None else int(topk)


def _speculative_refusals(ctx: Context, role: EffectiveRole, res: Resolved) -> list[str]:
    algorithm = str(role.get("speculative_algorithm", "")).upper()
    topk = _topk(ctx, role, algorithm) if algorithm else None
    if topk is None:
        return []
    if algorithm == "NGRAM":
        said = []
        if topk > 1 and res.page_size > 1 and res.attention_backend != "flashinfer":
            said.append(messages.ngram_page_backend(topk, res.page_size))
        if role.enable_dp_attention:
            said.append(messages.NGRAM_DP_ATTENTION)
        return said
    if algorithm not in EAGLE_FAMILY or topk <= 1:
        return []
    if "trtllm_mha" in res.names():
        return [messages.TRTLLM_MHA_TOPK_ONE]
    if res.page_size > 1 and res.attention_backend not in TREE_PAGE_BACKENDS:
        return [messages.spec_tree_page_backend(TREE_PAGE_BACKENDS, res.attention_backend)]
    return []


def speculative_backend(ctx: Context) -> Outcome:
    """Speculative top-k > 1 (tree drafts, NGRAM) on pages with a backend SGLang refuses for it; NGRAM + DP
    attention."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}")
    for role in ctx.roles():
        for kind, res in _resolved(ctx, role):
            said = _speculative_refusals(ctx, role, res)
            if said:
                return fired(f"{role.name}: {' '.join(said)} ({_backend_words(res, kind)}, page size "
                             f"{res.page_size}; {ctx.version_words})")
    return passed("no speculative top-k above 1 on pages with a backend SGLang refuses for it")


DSA_KV_DTYPES = ("auto", "bf16", "bfloat16", "fp8_e4m3")


def dsa_kv_dtype(ctx: Context) -> Outcome:
    """DeepSeek's DSA models run bf16 or fp8_e4m3 KV only: SGLang asserts so at start-up."""
    if not ctx.sglang or not ctx.spec.dsa:
        return passed("not a DSA model on SGLang")
    bad = [r for r in ctx.roles() if r.kv_cache_dtype not in DSA_KV_DTYPES]
    if bad:
        return fired(f"{bad[0].name}: {messages.DSA_KV_DTYPE} (kv_cache_dtype {bad[0].kv_cache_dtype})")
    return passed("a DSA model with bf16 / fp8_e4m3 KV")


def _radix_on(role: EffectiveRole) -> bool:
    if role.get("disable_radix_cache", False):
        return False
    return role.name != "decode" or bool(role.get("disaggregation_decode_enable_radix_cache", False))


def _no_buffer_refusals(ctx: Context, role: EffectiveRole) -> list[str]:
    if str(role.get("mamba_radix_cache_strategy", "auto")) != "no_buffer" or not _radix_on(role):
        return []
    said = []
    if role.page_size not in (1, None):
        said.append(messages.MAMBA_NO_BUFFER_PAGE)
    if not role.get("disable_overlap_schedule", False):
        said.append(messages.MAMBA_NO_BUFFER_OVERLAP)
    if any(res.attention_backend == "trtllm_mha" for _, res in _resolved(ctx, role)):
        said.append(messages.MAMBA_NO_BUFFER_TRTLLM_MHA)
    return said


def mamba_no_buffer(ctx: Context) -> Outcome:
    """A hybrid linear-attention model's radix cache with the no_buffer mamba strategy: page size 1, overlap
    schedule off, no trtllm_mha, or SGLang asserts at start-up."""
    if not ctx.sglang or not ctx.spec.hybrid_linear:
        return passed("not a hybrid linear-attention model on SGLang")
    for role in ctx.roles():
        said = _no_buffer_refusals(ctx, role)
        if said:
            return fired(f"{role.name}: {' '.join(said)} ({ctx.version_words})")
    return passed("no mamba no_buffer radix cache it refuses")
