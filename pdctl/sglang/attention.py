"""The attention backend and page size SGLang's start-up resolution settles on, per GPU, model and release.

A pure prediction of three steps of SGLang's argument resolution, read off the wheels of 0.5.16-0.5.23 (0.5.23:
arg_groups/model_overrides/deepseek_v2.py, model_override_base.py::get_default_attn_backend, overrides.py's
`_attention_backend_default` and page-size passes; 0.5.16-0.5.18: the same code in server_args.py and
arg_groups/overrides.py), in the order SGLang runs them:
1. the model's override: DeepSeek V3 / R1 (and the MLA models that share its class) on SM100 with no attention
   backend named -> trtllm_mla; GPT-OSS -> fa3 on Hopper, trtllm_mha on SM100;
2. the default (`get_default_attn_backend`): MHA models -> fa3 on Hopper and trtllm_mha on SM100 when there is
   no speculative top-k above 1 (top-k 1 only with page size 1), flashinfer otherwise; MLA models -> fa3 on
   Hopper, flashinfer on SM100. The top-k it reads is the one on the command line: NGRAM's (its BFS breadth) and
   EAGLE's auto-chosen one are set later, by the speculative hook;
3. the page-size snaps (`_mla_backend_page_constraints`, `_fa4_page_constraint`): flashmla -> 64; trtllm_mla
   outside 32 / 64 -> 64; cutlass_mla (a choice until 0.5.19) -> 128; trtllm_mha outside 16 / 32 / 64 (/ 128
   since 0.5.17) -> 64; fa4 on SM100 for a non-MLA model with top-k <= 1 -> 128. An unset page size is 1 after
   them (`_page_size_default` on CUDA); then fa3 falls back to triton for fp8_e5m2 KV.
The speculative hook runs after these and judges their result (pdctl/compat/backends.py).
DSA models (DeepSeek V3.2): the dsa backend unless one is named, on the page size SGLang sets for them.
Not modelled: GPUs other than Hopper / SM100 (CPU, SM120: None, check-compat says nothing rather than guess);
models with attention sinks other than GPT-OSS or unequal K/V widths (triton / fa4 defaults), Whisper, and the
other model classes with a backend override of their own (Nemotron-H, MiniMax M3, Kimi K3...): they get the
generic default here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pdctl.sglang.versions import Version, release

# The model classes whose override picks trtllm_mla on SM100 (deepseek_v2.py's registry, non-DSA arm), by the
# config.json model_type they carry: DeepSeek V3 / R1 / V3.1 and Kimi K2 (DeepseekV3ForCausalLM).
TRTLLM_MLA_DEFAULT_TYPES = frozenset({"deepseek_v3", "kimi_k2"})
# Model classes whose override names the backend per GPU whatever speculative decoding does (gpt_oss.py).
OWN_DEFAULT: dict[str, dict[str, str]] = {"gpt_oss": {"sm90": "fa3", "sm100": "trtllm_mha"}}
TRTLLM_MHA_PAGES = (16, 32, 64)  # 128 joined in 0.5.17
TRTLLM_MHA_PAGES_0_5_17 = (16, 32, 64, 128)
SM90, SM100 = "sm90", "sm100"


@dataclass(frozen=True)
class Resolved:
    """What the resolution settled on before the speculative hook reads it."""

    attention_backend: str
    decode_attention_backend: str | None
    prefill_attention_backend: str | None
    page_size: int
    why: str  # "set", or how SGLang chose it (for messages)

    def names(self) -> set[str]:
        return {b for b in (self.attention_backend, self.decode_attention_backend, self.prefill_attention_backend)
                if b}


def _topk_one_or_none(topk: int | None, page: int | None) -> bool:
    """utils/common.py::is_no_spec_infer_or_topk_one."""
    return topk is None or (topk == 1 and page in (1, None))


def default_backend(arch: str, mla: bool, algorithm: str | None, topk: int | None, page: int | None,
                    version: Version) -> str:
    """get_default_attn_backend on ARCH (sm90 / sm100) for a plain MHA or MLA model."""
    if mla:
        return "fa3" if arch == SM90 else "flashinfer"
    no_tree = _topk_one_or_none(topk, page)
    if arch == SM90 and no_tree:
        return "fa3"
    forced_one = algorithm is not None and algorithm.upper() == "DFLASH" and version >= release("0.5.23")
    if arch == SM100 and no_tree and (algorithm is None or topk is not None or forced_one):
        return "trtllm_mha"
    return "flashinfer"


def _mha_pages(version: Version) -> tuple[int, ...]:
    return TRTLLM_MHA_PAGES_0_5_17 if version >= release("0.5.17") else TRTLLM_MHA_PAGES


def _snap_page(backends: set[str], page: int | None, arch: str, mla: bool, topk: int | None,
               version: Version) -> int:
    """overrides.py's page passes, in their order; None (unset) is 1 after them."""
    if "flashmla" in backends:
        page = 64
    if "cutlass_mla" in backends:  # a choice until 0.5.19
        page = 128
    if backends & {"trtllm_mla", "cutedsl_mla"} and page not in (32, 64):
        page = 64
    if "trtllm_mha" in backends and page not in _mha_pages(version):
        page = 64
    if "fa4" in backends and not mla and arch == SM100 and (topk or 0) <= 1:
        page = 128
    return 1 if page is None else int(page)


def resolve(version: Version, arch: str | None, mla: bool, model_type: str | None, dsa_page: int | None,
            values: Mapping[str, Any]) -> Resolved | None:
    """VERSION: the judged release (parsed). VALUES: one role's parsed SGLang flags (argparse dests). ARCH: sm90 (H100/H200) or sm100 (B200/GB200/
    GB300); anything else -> None. DSA_PAGE: a DSA model's page size (deepseek_v2.py sets it, 64 x index_kpool
    since 0.5.22), None for other models."""
    if arch not in (SM90, SM100):
        return None
    attn, pre, dec = (values.get(k) for k in ("attention_backend", "prefill_attention_backend",
                                              "decode_attention_backend"))
    if dsa_page is not None:  # deepseek_v2.py: the dsa backend unless one is named, and its own page size
        named = attn is None and pre is None and dec is None
        if not named and attn is None:  # only per-phase backends named: both the same, or the MLA default
            attn = pre if pre is not None and pre == dec else default_backend(arch, True, None, None, None, version)
        return Resolved(attention_backend="dsa" if named else str(attn),
                        decode_attention_backend=dec, prefill_attention_backend=pre, page_size=dsa_page,
                        why="SGLang's choice for a DSA model" if named else "set")
    algorithm = values.get("speculative_algorithm")
    topk = values.get("speculative_eagle_topk")
    page = values.get("page_size")
    why = "set"
    if attn is None and pre is None and dec is None and arch == SM100 and mla \
            and str(model_type or "") in TRTLLM_MLA_DEFAULT_TYPES:
        attn, why = "trtllm_mla", "SGLang's choice for DeepSeek V3 on Blackwell (SM100)"
    if attn is None and pre is None and dec is None and str(model_type or "") in OWN_DEFAULT:
        attn, why = OWN_DEFAULT[str(model_type)][arch], f"SGLang's choice for {model_type}"
    if pre is not None and pre == dec:
        attn = pre
    elif attn is None:
        attn = default_backend(arch, mla, algorithm, topk, page, version)
        why = f"SGLang's default for this model on {'Hopper (SM90)' if arch == SM90 else 'Blackwell (SM100)'}"
    names = {b for b in (attn, pre, dec) if b}
    page = _snap_page(names, page, arch, mla, topk, version)
    if attn == "fa3" and values.get("kv_cache_dtype") == "fp8_e5m2":  # _attention_backend_fa3_fp8_fallback
        attn, why = "triton", "SGLang's fallback from fa3 for fp8_e5m2 KV"
    return Resolved(attention_backend=str(attn), decode_attention_backend=dec, prefill_attention_backend=pre,
                    page_size=page, why=why)
