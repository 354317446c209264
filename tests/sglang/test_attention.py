"""pdctl/sglang/attention.py: the attention backend and page size SGLang's start-up resolution settles on (each
case is what SGLang's own resolution answers for that shape: tests/sglang/test_resolution.py holds the predictor
against it on generated topologies, per release)."""

from __future__ import annotations

from pdctl.sglang.attention import SM90, SM100, resolve
from pdctl.sglang.versions import release

V23, V16 = release("0.5.23"), release("0.5.16")
EAGLE4 = {"speculative_algorithm": "EAGLE", "speculative_eagle_topk": 4}


def res(arch, values, *, mla=False, model_type="llama", dsa_page=None, version=V23):
    return resolve(version, arch, mla, model_type, dsa_page, values)


def test_mha_defaults_per_gpu_and_speculative_topk():
    assert res(SM90, {"page_size": 1}).attention_backend == "fa3"
    assert res(SM90, {"page_size": 16, "speculative_algorithm": "EAGLE", "speculative_eagle_topk": 1}
               ).attention_backend == "flashinfer"  # top-k 1 counts as "no tree" on page 1 only
    on_blackwell = res(SM100, {"page_size": 1})
    assert (on_blackwell.attention_backend, on_blackwell.page_size) == ("trtllm_mha", 64)  # its page snap
    assert res(SM100, {"page_size": 32, **EAGLE4}).attention_backend == "flashinfer"
    # NGRAM's top-k is set after the default is chosen: fa3 on Hopper, flashinfer on SM100
    assert res(SM90, {"page_size": 16, "speculative_algorithm": "NGRAM"}).attention_backend == "fa3"
    assert res(SM100, {"page_size": 16, "speculative_algorithm": "NGRAM"}).attention_backend == "flashinfer"


def test_model_overrides():
    deepseek = res(SM100, {"page_size": 16}, mla=True, model_type="deepseek_v3")
    assert (deepseek.attention_backend, deepseek.page_size) == ("trtllm_mla", 64)
    assert "DeepSeek V3" in deepseek.why
    assert res(SM90, {"page_size": 16}, mla=True, model_type="deepseek_v3").attention_backend == "fa3"
    assert res(SM100, {"decode_attention_backend": "flashinfer"}, mla=True, model_type="deepseek_v3"
               ).attention_backend == "flashinfer"  # a backend named: no override, the MLA default
    assert res(SM90, {**EAGLE4}, model_type="gpt_oss").attention_backend == "fa3"
    assert res(SM100, {**EAGLE4}, model_type="gpt_oss").attention_backend == "trtllm_mha"
    dsa = res(SM90, {"page_size": 1}, mla=True, model_type="deepseek_v32", dsa_page=64)
    assert (dsa.attention_backend, dsa.page_size) == ("dsa", 64)
    named = res(SM90, {"decode_attention_backend": "flashmla"}, mla=True, model_type="deepseek_v32", dsa_page=64)
    assert (named.attention_backend, named.decode_attention_backend) == ("fa3", "flashmla")


def test_named_backends_and_their_pages():
    assert res(SM100, {"attention_backend": "cutlass_mla", "page_size": 32}, version=V16).page_size == 128
    assert res(SM100, {"attention_backend": "flashmla", "page_size": 1}).page_size == 64
    assert res(SM100, {"attention_backend": "trtllm_mha", "page_size": 128}).page_size == 128
    assert res(SM100, {"attention_backend": "trtllm_mha", "page_size": 128}, version=V16).page_size == 64
    assert res(SM100, {"attention_backend": "fa4", "page_size": 16}).page_size == 128
    assert res(SM100, {"attention_backend": "fa4", "page_size": 16, **EAGLE4}).page_size == 16
    same = res(SM90, {"prefill_attention_backend": "triton", "decode_attention_backend": "triton"})
    assert (same.attention_backend, same.page_size) == ("triton", 1)
    assert res(SM90, {"attention_backend": "fa3", "kv_cache_dtype": "fp8_e5m2"}).attention_backend == "triton"


def test_unmodelled_gpus_get_no_prediction():
    assert res(None, {"page_size": 1}) is None
    assert res("sm120", {"page_size": 1}) is None
