"""Hybrid linear-attention (Qwen3-Next, Qwen3.5) and DSA sparse-attention (DeepSeek-V3.2) configs: layer types,
the per-request mamba state and the indexer key cache, from trimmed published config.json files
(tests/models/configs/*.json, each naming its source)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.models.hf_config import spec_from_config
from pdctl.models.presets import find_preset
from pdctl.plan.transfer import plan_transfer
from pdctl.sglang import memory

CONFIGS = Path(__file__).with_name("configs")


def load(name: str):
    cfg = json.loads((CONFIGS / name).read_text())
    assert cfg["_source"].startswith(("Qwen/", "deepseek-ai/"))
    return spec_from_config(cfg, name=name, source=name)


def test_qwen35_layer_types_with_linear_attention_load() -> None:
    # issue 36: this config exited 2 with "unsupported layer type 'linear_attention'"
    spec = load("qwen3.5-moe-trimmed.config.json")
    assert spec.linear_layers == [0, 1, 2, 4, 5, 6] and spec.kv_layers == spec.full_layers == [3, 7]
    assert spec.hybrid_linear and not spec.hybrid_swa and not spec.dsa
    # SGLang's Mamba2StateShape: conv [conv_dim / tp, kernel - 1] bf16 with conv_dim = v_heads x v_dim + 2 x
    # k_heads x k_dim = 64*128 + 2*16*128; SSM [v_heads / tp, v_dim, k_dim] float32
    conv, ssm = 12288 * 3 * 2, 64 * 128 * 128 * 4
    assert spec.state_bytes_per_request(1) == 6 * (conv + ssm)
    assert spec.state_bytes_per_request(2) == 6 * (conv + ssm) // 2


def test_qwen3_next_layout_follows_full_attention_interval() -> None:
    spec = load("qwen3-next-trimmed.config.json")
    assert spec.full_layers == list(range(3, 48, 4)) and len(spec.linear_layers) == 36
    preset = find_preset("Qwen3-Next-80B-A3B-Instruct")  # the preset is the published config
    assert preset is not None and (preset.layer_types, preset.linear) == (spec.layer_types, spec.linear)
    assert spec.state_bytes_per_request(1) == 36 * (8192 * 3 * 2 + 32 * 128 * 128 * 4)


def test_deepseek_v32_indexer_cache() -> None:
    spec = load("deepseek-v3.2-trimmed.config.json")
    assert spec.mla and spec.dsa and spec.index_head_dim == 128 and not spec.hybrid_linear
    # DSATokenToKVPool: 128 fp8 key bytes + one fp32 scale per 128, per token per layer
    assert spec.indexer_bytes_per_token() == 61 * 132
    preset = find_preset("deepseek-v3.2-exp")
    assert preset is not None and preset.indexer_bytes_per_token() == spec.indexer_bytes_per_token()
    assert spec.index_kpool == 1 and not spec.mtp_index_share  # the published config sets neither


def test_dsa_index_kpool_and_mtp_index_share_are_read_only_for_dsa() -> None:
    cfg = json.loads((CONFIGS / "deepseek-v3.2-trimmed.config.json").read_text())
    extra = {"index_kpool": 4, "index_share_for_mtp_iteration": True}
    spec = spec_from_config({**cfg, **extra}, name="dsa", source="dsa")
    assert spec.index_kpool == 4 and spec.mtp_index_share
    plain = {k: v for k, v in cfg.items() if not k.startswith("index_")}  # no index_topk: not DSA
    spec = spec_from_config({**plain, **extra}, name="mla", source="mla")
    assert not spec.dsa and spec.index_kpool == 1 and not spec.mtp_index_share


@pytest.mark.parametrize(("change", "message"), [
    ({"layer_types": ["mystery"] * 48}, "unsupported layer type 'mystery'"),
    ({"index_topk": 2048, "index_head_dim": 64}, "index_head_dim 64"),
])
def test_bad_configs_are_user_errors(change: dict, message: str) -> None:
    cfg = {**json.loads((CONFIGS / "qwen3-next-trimmed.config.json").read_text()), **change}
    with pytest.raises(UserError, match=message):
        spec_from_config(cfg, name="x", source="x")


def test_plan_moves_kv_of_attention_layers_and_the_mamba_state() -> None:
    spec = load("qwen3-next-trimmed.config.json")
    plan = plan_transfer(spec, tokens=4096, prefill_tp=2, decode_tp=2, page_size=64)
    assert plan.full_layers == 12  # linear-attention layers have no KV pages
    (state,) = plan.states
    assert state.kind == "mamba" and state.layers == 36
    assert state.bytes_per_decode_rank == spec.state_bytes_per_request(2)
    unequal = plan_transfer(spec, tokens=4096, prefill_tp=1, decode_tp=2, page_size=64).states[0]
    assert unequal.bytes == spec.state_bytes_per_request(1) and "split into 2" in unequal.how
    dsa = plan_transfer(load("deepseek-v3.2-trimmed.config.json"), tokens=100, prefill_tp=8, decode_tp=8,
                        page_size=64)
    assert [s.kind for s in dsa.states] == ["dsa"] and dsa.states[0].bytes_per_decode_rank == 128 * 61 * 132


def test_kv_share_gives_the_mamba_pool_its_ratio_first() -> None:
    assert memory.kv_share(19.0, False) == 19.0
    assert memory.kv_share(19.0, True) == pytest.approx(10.0)  # 19 - 19 x 0.9 / 1.9
    assert memory.kv_share(20.0, True, "1.0") == pytest.approx(10.0)
