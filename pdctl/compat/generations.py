"""Prefill and decode on different GPU generations (e.g. prefill on H100, decode on GB300).

SGLang picks kernels per GPU: attention backends, MoE kernels, even the page size differ by generation.
Long-run drift was reported for such a pair (sglang#23020: GPQA 95% -> ~50% after ~100 requests, RTX 5090
prefill / H20 decode) with no root cause: a warning that names the risk and the soak test that measures it.
Where the generations provably disagree on the KV layout it is an error: with no attention backend set,
SGLang runs trtllm_mha on Blackwell (SM100) for non-MLA models and rewrites a page size trtllm_mha cannot
use to 64, while the Hopper side keeps it; the decode's handshake then refuses the prefill
("Page size mismatch").
"""

from __future__ import annotations

from pdctl.compat.context import BLACKWELL, HOPPER, Context
from pdctl.compat.effective import EffectiveRole
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import incidents, messages
from pdctl.sglang.attention import SM100, resolve
from pdctl.sglang.versions import at_least

GENERATIONS = {**{k: "Hopper (SM90)" for k in HOPPER}, **{k: "Blackwell (SM100)" for k in BLACKWELL}, "cpu": "CPU"}
# trtllm_mha's page sizes (arg_groups/overrides.py::_mla_backend_page_constraints): 128 joined in 0.5.17
TRTLLM_MHA_PAGES = (16, 32, 64)
TRTLLM_MHA_PAGES_0_5_17 = (16, 32, 64, 128)
TRTLLM_MHA_DEFAULT_SINCE = "0.5.10"  # get_default_attn_backend: trtllm_mha on SM100 for MHA models
PREDICTED_SINCE = "0.5.16"  # the releases pdctl/sglang/attention.py was read off (and checked against)


def _generations(ctx: Context) -> dict[str, set[str]]:
    return {r.name: {GENERATIONS.get(k, k) for k in ctx.gpu_kinds(r)} for r in ctx.roles()}


def mixed_gpu_generations(ctx: Context) -> Outcome:
    """Different kernels on each side of the KV transfer: drift reported after ~100 requests (sglang#23020)."""
    gens = _generations(ctx)
    pre, dec = gens.get("prefill", set()), gens.get("decode", set())
    if pre and dec and pre != dec and not {"CPU"} & (pre | dec):
        return fired(f"prefill runs on {'/'.join(sorted(pre))}, decode on {'/'.join(sorted(dec))}: SGLang picks other "
                     "attention and MoE kernels on each, so decode continues from KV another kernel computed; "
                     f"accuracy drift after ~100 requests was reported for such a pair ({incidents.MIXED_GPU_DRIFT.report}, "
                     "open). Measure before serving: `pdctl parity --soak N` against a single-generation reference")
    return passed(f"one GPU generation ({'/'.join(sorted(pre | dec)) or 'none'})")


def _trtllm_pages(ctx: Context) -> tuple[int, ...]:
    return TRTLLM_MHA_PAGES_0_5_17 if at_least(ctx.eff.version, "0.5.17") else TRTLLM_MHA_PAGES


def _trtllm_mha(ctx: Context, role: EffectiveRole) -> str | None:
    """Why ROLE runs trtllm_mha (None: it does not): set, or SGLang's default on Blackwell for a non-MLA model."""
    if ctx.mla:
        return None
    if "trtllm_mha" in role.attention_backends:
        return "attention_backend trtllm_mha"
    if (not role.attention_backends and set(ctx.gpu_kinds(role)) & BLACKWELL
            and at_least(ctx.eff.version, TRTLLM_MHA_DEFAULT_SINCE)):
        chosen = resolve(ctx.eff.version.parsed, SM100, False, ctx.spec.model_type, None, role.values)
        if at_least(ctx.eff.version, PREDICTED_SINCE) and chosen is not None and chosen.attention_backend != "trtllm_mha":
            return None  # a speculative tree (or NGRAM): SGLang picks flashinfer there (pdctl/sglang/attention.py)
        return "Blackwell, where SGLang picks trtllm_mha for this model"
    return None


def _rewrites_page(ctx: Context, role: EffectiveRole) -> bool:
    """SGLang will replace ROLE's page size with 64 (trtllm_mha cannot use it)."""
    return _trtllm_mha(ctx, role) is not None and (role.page_size or 1) not in _trtllm_pages(ctx)


def mixed_gpu_page_size(ctx: Context) -> Outcome:
    """A Blackwell side whose trtllm_mha rewrites the page size, against a side that keeps it: handshake error."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}")
    rewritten = {r.name: _rewrites_page(ctx, r) for r in ctx.roles()}
    if rewritten.get("prefill") != rewritten.get("decode"):
        who = next(n for n, v in rewritten.items() if v)
        other = "decode" if who == "prefill" else "prefill"
        page = (ctx.pre if who == "prefill" else ctx.dec).page_size or 1
        runs = {who: 64, other: page}
        return fired(f"{who} runs trtllm_mha ({_trtllm_mha(ctx, ctx.pre if who == 'prefill' else ctx.dec)}), and SGLang says: "
                     f"'{messages.trtllm_mha_page(page, _trtllm_pages(ctx))}'; {other} keeps page_size {page}. "
                     f"The handshake then fails: {messages.page_size_mismatch(runs['prefill'], runs['decode'])}")
    return passed("the same page size on both GPU generations")
