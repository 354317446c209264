"""Weight accounting: parameter counts of the published configs, storage by dtype/quantization, TP sharding."""

from __future__ import annotations

import pytest

from pdctl.models import PRESETS
from pdctl.models.hf_config import spec_from_config
from pdctl.models.presets import CONFIGS
from pdctl.models.weights import MXFP4, weights_from_config


@pytest.mark.parametrize("name,billions", [("gpt-oss-20b", 20.9), ("gpt-oss-120b", 116.8), ("llama-3.1-8b", 8.03),
                                           ("deepseek-v3", 671.0)])
def test_parameter_counts_match_the_published_sizes(name: str, billions: float) -> None:
    weights = PRESETS[name].weights
    assert weights is not None and weights.params / 1e9 == pytest.approx(billions, rel=0.01)


def test_storage_follows_dtype_and_quantization() -> None:
    oss = weights_from_config(CONFIGS["gpt-oss-120b"])
    assert oss is not None
    experts = next(g for g in oss.groups if g.name == "MoE experts")
    assert experts.bytes_per_param == MXFP4 == 0.53125 and all(
        g.bytes_per_param == 2 for g in oss.groups if g.name != "MoE experts")
    llama = weights_from_config(CONFIGS["llama-3.1-8b"])
    assert llama is not None and llama.total_bytes == pytest.approx(2 * llama.params)
    fp8 = weights_from_config(CONFIGS["llama-3.1-8b"], quantization="fp8")  # SGLang's --quantization fp8
    assert fp8 is not None and fp8.total_bytes < 0.6 * llama.total_bytes
    assert weights_from_config({**CONFIGS["llama-3.1-8b"], "quantization_config": {"quant_method": "awq"}}) is None
    assert weights_from_config({"hidden_size": 8}) is None  # not countable: no estimate, never a guess


def test_sharding_per_rank() -> None:
    llama = weights_from_config(CONFIGS["llama-3.1-8b"])
    assert llama is not None
    one, four = llama.bytes_per_rank(tp=1, attn_tp=1, kv_heads=8), llama.bytes_per_rank(tp=4, attn_tp=4, kv_heads=8)
    assert four == pytest.approx(one / 4, rel=0.01)
    # attention TP 16 > 8 KV heads: K/V replicated, so a rank holds more than 1/16
    sixteen = llama.bytes_per_rank(tp=16, attn_tp=16, kv_heads=8)
    assert sixteen > one / 16


def test_config_json_specs_carry_weights_type_and_context() -> None:
    spec = spec_from_config({**CONFIGS["gpt-oss-20b"], "layer_types": ["sliding_attention", "full_attention"] * 12,
                             "sliding_window": 128}, name="x", source="cfg")
    assert spec.model_type == "gpt_oss" and spec.context_length == 131072 and spec.weights is not None
    assert "weights" not in spec.to_dict() and spec.to_dict()["model_type"] == "gpt_oss"
