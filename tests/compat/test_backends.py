"""The start-up refusals that read the attention backend SGLang resolves (pdctl/compat/backends.py), the DSA KV
dtype and mamba's no_buffer strategy: each fires on the shape SGLang refused in the start-up differential and
passes on the fixed one (SGLang's own verdicts on both: tests/sglang/test_resolution.py)."""

from __future__ import annotations

from typing import Any

from pdctl.compat import evaluate
from pdctl.sglang import messages
from tests.support.topo_factory import gpu, rendered

DEEPSEEK = {"preset": "deepseek-v3", "path": "deepseek-ai/DeepSeek-V3"}
LLAMA = {"preset": "llama-3.1-8b", "path": "meta-llama/Llama-3.1-8B-Instruct"}
EAGLE4 = {"speculative-algorithm": "EAGLE", "speculative-num-steps": 3, "speculative-eagle-topk": 4,
          "speculative-num-draft-tokens": 8}


def verdict(rule: str, *, kind: str = "gb300", version: str = "0.5.23", server: dict[str, Any] | None = None,
            **kw: Any):
    deployment, spec = rendered(engine={"version": version}, nodes=gpu(kind), server=server or {}, **kw)
    return next(f for f in evaluate(deployment, spec) if f.rule == rule)


def test_trtllm_mla_that_sglang_chose_refuses_mxfp8():
    bad = verdict("attention-backend-args", kind="b200", model=DEEPSEEK, server={"kv_cache_dtype": "mxfp8"})
    assert not bad.ok and messages.trtllm_mla_kv_dtype(False) in bad.message and "DeepSeek V3" in bad.message
    assert verdict("attention-backend-args", kind="b200", model=DEEPSEEK, server={"kv_cache_dtype": "fp8_e4m3"}).ok
    assert verdict("attention-backend-args", kind="b200", model=DEEPSEEK,
                   server={"kv_cache_dtype": "mxfp8", "attention_backend": "flashinfer"}).ok
    old = verdict("attention-backend-args", kind="b200", version="0.5.20", model=DEEPSEEK,
                  server={"kv_cache_dtype": "fp8_e5m2"})
    assert not old.ok and messages.trtllm_mla_kv_dtype(True) in old.message


def test_trtllm_mla_and_old_trtllm_mha_prefill_on_hopper():
    bad = verdict("attention-backend-args", kind="h200", model=DEEPSEEK, server={"attention_backend": "trtllm_mla"})
    assert not bad.ok and messages.TRTLLM_MLA_NEEDS_BLACKWELL in bad.message
    assert verdict("attention-backend-args", kind="h200", model=DEEPSEEK).ok  # fa3 there
    old = verdict("attention-backend-args", kind="h200", version="0.5.18", model=LLAMA,
                  server={"attention_backend": "trtllm_mha"})
    assert not old.ok and messages.TRTLLM_MHA_PREFILL_BLACKWELL in old.message
    assert verdict("attention-backend-args", kind="h200", version="0.5.19", model=LLAMA,
                   server={"attention_backend": "trtllm_mha"}).ok


def test_tree_drafts_on_pages_need_a_cascade_backend():
    spec = {"args": EAGLE4}
    bad = verdict("speculative-backend", kind="b200", model=DEEPSEEK, server={"page_size": 64},
                  prefill=spec, decode=spec)
    assert not bad.ok and messages.spec_tree_page_backend(("flashinfer", "fa3", "triton"), "trtllm_mla") in bad.message
    assert verdict("speculative-backend", kind="h200", model=DEEPSEEK, server={"page_size": 64},
                   prefill=spec, decode=spec).ok  # fa3 on Hopper
    mha = verdict("speculative-backend", kind="b200", model=LLAMA,
                  server={"page_size": 64, "attention_backend": "trtllm_mha"}, prefill=spec, decode=spec)
    assert not mha.ok and messages.TRTLLM_MHA_TOPK_ONE in mha.message
    assert verdict("speculative-backend", kind="b200", model=LLAMA, server={"page_size": 64},
                   prefill=spec, decode=spec).ok  # flashinfer


def test_ngram_on_pages_needs_flashinfer_and_no_dp_attention():
    ngram = {"args": {"speculative-algorithm": "NGRAM"}}
    bad = verdict("speculative-backend", kind="h100", model=LLAMA, server={"page_size": 16},
                  prefill=ngram, decode=ngram)
    assert not bad.ok and messages.ngram_page_backend(10, 16) in bad.message
    assert verdict("speculative-backend", kind="h100", model=LLAMA, server={"page_size": 1},
                   prefill=ngram, decode=ngram).ok
    assert verdict("speculative-backend", kind="h100", model=LLAMA,
                   server={"page_size": 16, "attention_backend": "flashinfer"}, prefill=ngram, decode=ngram).ok
    dp = verdict("speculative-backend", kind="h100", model=LLAMA, server={"page_size": 1}, prefill=ngram,
                 decode={**ngram, "enable_dp_attention": True, "dp": 4})
    assert not dp.ok and messages.NGRAM_DP_ATTENTION in dp.message


def test_dsa_models_take_bf16_or_fp8_kv():
    dsa = {"preset": "deepseek-v3.2", "path": "deepseek-ai/DeepSeek-V3.2"}
    bad = verdict("dsa-kv-dtype", kind="b200", model=dsa, server={"kv_cache_dtype": "mxfp8"})
    assert not bad.ok and messages.DSA_KV_DTYPE in bad.message
    assert verdict("dsa-kv-dtype", kind="b200", model=dsa, server={"kv_cache_dtype": "fp8_e4m3"}).ok
    assert verdict("dsa-kv-dtype", kind="b200", model=DEEPSEEK, server={"kv_cache_dtype": "mxfp8"}).ok


def test_mamba_no_buffer_needs_page_one_and_no_overlap():
    qwen = {"preset": "qwen3-next-80b-a3b", "path": "Qwen/Qwen3-Next-80B-A3B-Instruct"}
    no_buffer = {"mamba-radix-cache-strategy": "no_buffer"}
    bad = verdict("mamba-no-buffer", kind="h200", model=qwen, server={"page_size": 64}, prefill={"args": no_buffer})
    assert not bad.ok and messages.MAMBA_NO_BUFFER_PAGE in bad.message and bad.message.startswith("prefill")
    assert verdict("mamba-no-buffer", kind="h200", model=qwen, server={"page_size": 1},
                   prefill={"args": {**no_buffer, "disable-overlap-schedule": True}}).ok
    assert verdict("mamba-no-buffer", kind="h200", model=qwen, server={"page_size": 64},
                   decode={"args": no_buffer}).ok  # decode's radix cache is off in PD: no mamba radix cache


def test_pp_with_eagle_runs_on_a_pd_prefill_only():
    eagle = {"speculative-algorithm": "EAGLE", "speculative-num-steps": 1, "speculative-eagle-topk": 1,
             "speculative-num-draft-tokens": 2}
    bad = verdict("pp-speculative", prefill={"args": eagle}, decode={"tp": 2, "pp": 2, "args": eagle})
    assert not bad.ok and messages.PP_MTP_PREFILL_ONLY in bad.message and bad.message.startswith("decode")
    assert verdict("pp-speculative", prefill={"tp": 2, "pp": 2, "args": eagle}, decode={"args": eagle}).ok
