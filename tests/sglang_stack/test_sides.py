"""A topology as the two sides of a rehearsal on SGLang's stack (pure: no SGLang is started)."""

from __future__ import annotations

import pytest

from pdctl.errors import UserError
from pdctl.sglang_stack.sides import side_specs
from tests.support.topo_factory import make, make_colocated


def test_each_role_is_described_as_it_runs():
    topo, spec = make(decode={"page_size": 32, "hybrid_swa_memory": False, "kv_cache_dtype": "fp8_e4m3"})
    pre, dec = side_specs(topo, tokens=300)
    assert (pre.role, pre.tp, dec.role, dec.tp) == ("prefill", 1, "decode", 4)
    assert pre.page_size == 64 and dec.page_size == 32
    assert pre.swa_layers == spec.swa_layers and pre.window == spec.sliding_window
    assert dec.swa_layers == [] and dec.full_layers == list(range(spec.num_layers)) and dec.window is None
    assert (pre.dtype, pre.kv_cache_dtype, dec.dtype, dec.kv_cache_dtype) == (
        "bfloat16", "auto", "float8_e4m3fn", "fp8_e4m3")
    assert pre.kv_heads == dec.kv_heads == 8 and pre.backend == dec.backend == "nixl"
    assert side_specs(topo, tokens=300, backend="mooncake")[0].backend == "mooncake"


def test_the_reference_engine_caches_float32():
    topo, _ = make(engine={"kind": "reference", "version": None})
    assert side_specs(topo, tokens=10)[0].dtype == "float32"


@pytest.mark.parametrize(("over", "words"), [
    ({"prefill": {"pp": 2}}, "pp 1"),
    ({"server": {"kv_layout": "vectorized_5d"}}, "ROCm"),
    ({"model": {"path": "deepseek-ai/DeepSeek-V3", "preset": None}}, "MLA"),
    ({"server": {"context_length": 128}}, "exceeds the topology's context_length 128"),
])
def test_what_a_rehearsal_cannot_run_is_bad_input(over, words):
    topo, _ = make(**over)
    with pytest.raises(UserError, match=words):
        side_specs(topo, tokens=256)


def test_colocated_and_zero_tokens_are_bad_input():
    with pytest.raises(UserError, match="colocated"):
        side_specs(make_colocated()[0], tokens=10)
    with pytest.raises(UserError, match="positive"):
        side_specs(make()[0], tokens=0)


QWEN3_NEXT = {"model": {"path": "Qwen/Qwen3-Next-80B-A3B-Instruct", "preset": None}}


def test_a_hybrid_linear_attention_model_carries_its_mamba_state_shape():
    topo, spec = make(**QWEN3_NEXT, decode={"tp": 2})
    pre, dec = side_specs(topo, tokens=300)
    assert spec.hybrid_linear and len(spec.linear_layers) == 36
    for side in (pre, dec):  # the KV pages hold the full-attention layers only; the rest is the mamba state
        assert side.full_layers == spec.full_layers == [3, 7, 11, 15, 19, 23, 27, 31, 35, 39, 43, 47]
        assert side.linear_layers == spec.linear_layers and side.swa_layers == []
        assert side.linear == {"num_key_heads": 16, "num_value_heads": 32, "key_head_dim": 128,
                               "value_head_dim": 128, "conv_kernel": 4, "ssm_bytes": 4}
    plain, _ = make()
    assert side_specs(plain, tokens=10)[0].linear is None and side_specs(plain, tokens=10)[0].linear_layers == []


def test_linear_heads_a_tp_does_not_divide_are_bad_input():
    topo, _ = make(**QWEN3_NEXT, decode={"tp": 3})
    with pytest.raises(UserError, match="attention TP 3 does not divide .* 16 key / 32 value linear-attention heads"):
        side_specs(topo, tokens=10)
