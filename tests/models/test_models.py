"""Model specs: presets, config.json parsing, and TOPOLOGY.md's resolution order (HF cache read offline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.models import PRESETS, ModelSpec, find_preset, resolve_model_spec
from pdctl.models.hf_config import spec_from_config

GPT_OSS_20B_CONFIG = {  # the fields of openai/gpt-oss-20b's config.json that matter here
    "architectures": ["GptOssForCausalLM"], "model_type": "gpt_oss", "hidden_size": 2880,
    "num_hidden_layers": 24, "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
    "sliding_window": 128, "vocab_size": 201088,
    "layer_types": ["sliding_attention", "full_attention"] * 12,
}
DEEPSEEK_V3_CONFIG = {
    "model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64,
    "v_head_dim": 128, "vocab_size": 129280,
}
LLAMA_CONFIG = {"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
                "num_key_value_heads": 8, "vocab_size": 128256, "sliding_window": None}


def _same_shape(a: ModelSpec, b: ModelSpec) -> None:
    for key in ("num_layers", "num_attention_heads", "num_kv_heads", "head_dim", "layer_types", "sliding_window",
                "mla", "kv_lora_rank", "hidden_size", "vocab_size"):
        assert getattr(a, key) == getattr(b, key), key


def test_presets_match_the_issue():
    g20, g120 = PRESETS["gpt-oss-20b"], PRESETS["gpt-oss-120b"]
    assert (g20.num_layers, g20.num_attention_heads, g20.num_kv_heads, g20.head_dim, g20.sliding_window) == (
        24, 64, 8, 64, 128)
    assert g20.layer_types[:4] == ["sliding", "full", "sliding", "full"] and g20.hybrid_swa
    assert g120.num_layers == 36 and len(g120.swa_layers) == len(g120.full_layers) == 18
    llama = PRESETS["llama-3.1-8b"]
    assert (llama.num_layers, llama.num_attention_heads, llama.num_kv_heads, llama.head_dim) == (32, 32, 8, 128)
    assert not llama.hybrid_swa and llama.sliding_window is None
    ds = PRESETS["deepseek-v3"]
    assert ds.mla and ds.kv_lora_rank == 512 and ds.num_layers == 61 and ds.num_attention_heads == 128
    assert ds.kv_elems_per_token() == 576


def test_hf_configs_parse_to_the_presets():
    _same_shape(spec_from_config(GPT_OSS_20B_CONFIG, name="x", source="t"), PRESETS["gpt-oss-20b"])
    _same_shape(spec_from_config(DEEPSEEK_V3_CONFIG, name="x", source="t"), PRESETS["deepseek-v3"])
    _same_shape(spec_from_config(LLAMA_CONFIG, name="x", source="t"), PRESETS["llama-3.1-8b"])


def test_reference_tiny_equals_reference_engine_default_checkpoint():
    from pdctl.reference.checkpoint import DEFAULT_CONFIG

    _same_shape(spec_from_config(dict(DEFAULT_CONFIG), name="x", source="t"), PRESETS["reference-tiny"])


def test_nested_text_config_and_defaults():
    spec = spec_from_config({"text_config": {"num_hidden_layers": 2, "num_attention_heads": 4, "hidden_size": 64}},
                            name="mm", source="t")
    assert spec.num_kv_heads == 4 and spec.head_dim == 16 and spec.layer_types == ["full", "full"]


@pytest.mark.parametrize("cfg,needle", [
    ({"num_attention_heads": 4}, "num_hidden_layers"),
    ({"num_hidden_layers": 2, "num_attention_heads": 4}, "neither head_dim nor hidden_size"),
    ({"num_hidden_layers": 2, "num_attention_heads": "4", "head_dim": 8}, "num_attention_heads"),
    ({"num_hidden_layers": 2, "num_attention_heads": 4, "head_dim": 8, "layer_types": ["full_attention"]},
     "layer_types"),
    ({"num_hidden_layers": 1, "num_attention_heads": 4, "head_dim": 8, "layer_types": ["mamba"]}, "mamba"),
    ({"num_hidden_layers": 1, "num_attention_heads": 4, "head_dim": 8, "layer_types": ["sliding_attention"]},
     "sliding_window is not set"),
])
def test_bad_configs_are_user_errors(cfg, needle):
    with pytest.raises(UserError, match=needle):
        spec_from_config(cfg, name="bad", source="cfg.json")


def _write(path: Path, cfg: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(cfg))
    return path


def test_resolution_order(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    monkeypatch.delenv("HF_HUB_CACHE", raising=False)
    monkeypatch.delenv("HUGGINGFACE_HUB_CACHE", raising=False)
    explicit = _write(tmp_path / "explicit.json", LLAMA_CONFIG)
    local = _write(tmp_path / "gpt-oss-120b" / "config.json", GPT_OSS_20B_CONFIG)
    # 1. model.config wins over everything
    spec = resolve_model_spec({"path": str(local.parent), "config": str(explicit), "preset": "deepseek-v3"})
    assert spec.num_layers == 32 and spec.source == str(explicit.resolve())
    # 2. <path>/config.json for a directory (over a preset, and over the name-matching preset)
    spec = resolve_model_spec({"path": str(local.parent), "preset": "deepseek-v3"})
    assert spec.num_layers == 24 and spec.name == "gpt-oss-120b"
    # 3. HF cache, offline: refs/main -> snapshot
    repo = tmp_path / "hf" / "hub" / "models--openai--gpt-oss-120b"
    _write(repo / "snapshots" / "abc123" / "config.json", DEEPSEEK_V3_CONFIG)
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    spec = resolve_model_spec({"path": "openai/gpt-oss-120b", "preset": "llama-3.1-8b"})
    assert spec.mla and "abc123" in spec.source
    # ... a pinned revision that is not cached falls through to the preset
    spec = resolve_model_spec({"path": "openai/gpt-oss-120b", "revision": "v9", "preset": "llama-3.1-8b"})
    assert spec.source == "preset:llama-3.1-8b"
    # 4. preset; 5. preset named like the last path component (case-insensitive)
    spec = resolve_model_spec({"path": "someone/GPT-OSS-20B"})
    assert spec.source == "preset:gpt-oss-20b"
    spec = resolve_model_spec({"path": "meta-llama/Llama-3.1-8B-Instruct"})
    assert spec.name == "llama-3.1-8b"


def test_hf_cache_any_snapshot_and_revision(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    repo = tmp_path / "hub" / "models--acme--tiny"
    _write(repo / "snapshots" / "r1" / "config.json", LLAMA_CONFIG)
    assert resolve_model_spec({"path": "acme/tiny"}).num_layers == 32  # no refs/main: any snapshot
    _write(repo / "snapshots" / "deadbeef" / "config.json", GPT_OSS_20B_CONFIG)
    (repo / "refs").mkdir()
    (repo / "refs" / "v1").write_text("deadbeef\n")
    assert resolve_model_spec({"path": "acme/tiny", "revision": "v1"}).num_layers == 24


def test_resolution_errors(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    with pytest.raises(UserError, match="does not exist"):
        resolve_model_spec({"path": "x/y", "config": str(tmp_path / "nope.json")})
    with pytest.raises(UserError, match="did you mean 'gpt-oss-20b'"):
        resolve_model_spec({"path": "x/y", "preset": "gpt-oss-20"})
    with pytest.raises(UserError, match=r"tried: .*HF cache .*models--acme--nothing.*model.preset \(not set\)"):
        resolve_model_spec({"path": "acme/nothing"})
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(UserError, match="directory has no config.json"):
        resolve_model_spec({"path": str(empty)})
    bad = _write(tmp_path / "bad" / "config.json", {})
    bad.write_text("{not json")
    with pytest.raises(UserError, match="not valid JSON"):
        resolve_model_spec({"path": str(bad.parent)})
    with pytest.raises(UserError, match="at least one"):
        resolve_model_spec({})


def test_find_preset_aliases_and_spec_validation():
    assert find_preset("DeepSeek-R1") is PRESETS["deepseek-v3"]
    assert find_preset("nope") is None
    with pytest.raises(ValueError):
        ModelSpec("x", 2, 4, 4, 8, ["full"], None)
    d = PRESETS["gpt-oss-20b"].to_dict()
    assert d["hybrid_swa"] and d["swa_layers"][:2] == [0, 2] and "extra" not in d


def test_resolves_topology_model_object(tmp_path):
    from pdctl.topology import build_topology

    topo = build_topology({"name": "t", "model": {"path": "openai/gpt-oss-20b", "preset": "gpt-oss-20b"},
                           "nodes": [{"name": "n", "host": "h", "gpu": "h100", "gpus": 2}],
                           "prefill": {"nodes": ["n"]}, "decode": {"nodes": ["n"]}})
    assert resolve_model_spec(topo.model).name == "gpt-oss-20b"


def test_a_missing_reference_checkpoint_points_at_init_checkpoint(tmp_path) -> None:
    from types import SimpleNamespace

    from pdctl.errors import UserError
    from pdctl.models import resolve_model_spec

    cfg = SimpleNamespace(path=str(tmp_path / "ckpt"), revision=None, config=None, preset=None)
    with pytest.raises(UserError, match=r"Fix: create the reference engine's checkpoint with `pdctl reference "
                                        rf"init-checkpoint {tmp_path / 'ckpt'}`"):
        resolve_model_spec(cfg, engine_kind="reference")
