"""Parse a Hugging Face config.json into a ModelSpec, reading only what PD compatibility depends on.

Keys follow the HF conventions SGLang itself reads: `num_key_value_heads` (defaults to the attention heads),
`head_dim` (or hidden_size / heads), `num_hidden_layers`, gpt-oss style `layer_types` + `sliding_window`, and
`kv_lora_rank` for MLA. Multimodal configs nest the language model under `text_config`. Hybrid linear attention
(Qwen3-Next `qwen3_next`, Qwen3.5 `qwen3_5_moe`): `linear_attention` in layer_types, or, without layer_types,
every `full_attention_interval`-th layer full (SGLang's Qwen3NextConfig.layers_block_type), and the state shape
`linear_num_key_heads` / `linear_num_value_heads` / `linear_key_head_dim` / `linear_value_head_dim` /
`linear_conv_kernel_dim`. DSA sparse attention (DeepSeek-V3.2 `deepseek_v32`): `index_head_dim` (with
`index_n_heads`, `index_topk`), which SGLang's DSATokenToKVPool requires to be 128, and `index_kpool` (SGLang
0.5.22+ sets a DSA model's page size to 64 x it) and `index_share_for_mtp_iteration` (GLM-5.2: its MTP draft reuses
the indexer top-k).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.jsonfiles import read_json_object
from pdctl.models.spec import LayerType, LinearAttention, ModelSpec
from pdctl.models.weights import weights_from_config

_SLIDING = {"sliding_attention", "sliding", "local_attention", "swa"}
_FULL = {"full_attention", "full", "attention", "global_attention"}
_LINEAR = {"linear_attention", "linear"}
# SGLang's Qwen3NextConfig defaults for the linear_* fields a config.json leaves out
_LINEAR_DEFAULTS = {"linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128,
                    "linear_value_head_dim": 128, "linear_conv_kernel_dim": 4}


def read_config_file(path: Path) -> dict[str, Any]:
    """Load a config.json; unreadable or non-object JSON is bad input (UserError), not a crash."""
    return read_json_object(path, "model config")


def _int(cfg: dict[str, Any], key: str, where: str, default: int | None = None) -> int | None:
    value = cfg.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UserError(f"{where}: {key}: expected a non-negative integer, got {value!r}")
    return value


def spec_from_config(cfg: dict[str, Any], *, name: str, source: str) -> ModelSpec:
    """Build a ModelSpec from a config.json dict; missing/odd keys name the file (`source`) and the key."""
    top = cfg
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], **{k: v for k, v in cfg.items() if k == "_name_or_path"}}
    layers = _int(cfg, "num_hidden_layers", source)
    heads = _int(cfg, "num_attention_heads", source)
    if not layers or not heads:
        raise UserError(f"{source}: model config needs positive num_hidden_layers and num_attention_heads")
    kv_heads = _int(cfg, "num_key_value_heads", source) or heads
    hidden = _int(cfg, "hidden_size", source)
    kv_lora_rank = _int(cfg, "kv_lora_rank", source)
    mla = kv_lora_rank is not None and kv_lora_rank > 0
    rope = _int(cfg, "qk_rope_head_dim", source) if mla else None
    head_dim = _int(cfg, "head_dim", source)
    if not head_dim and mla and cfg.get("qk_nope_head_dim") is not None:
        head_dim = (_int(cfg, "qk_nope_head_dim", source) or 0) + (rope or 0)
    if not head_dim:
        if not hidden:
            raise UserError(f"{source}: model config has neither head_dim nor hidden_size")
        head_dim = hidden // heads
    layer_types = _layer_types(cfg, layers, source)
    window = _int(cfg, "sliding_window", source)
    if "sliding" not in layer_types:
        window = None
    elif not window:
        raise UserError(f"{source}: layer_types has sliding layers but sliding_window is not set")
    linear = _linear(cfg, source) if "linear" in layer_types else None
    index_head_dim = _int(cfg, "index_head_dim", source) if cfg.get("index_topk") is not None else None
    if index_head_dim is not None and index_head_dim != 128:
        raise UserError(f"{source}: index_head_dim {index_head_dim}: SGLang's DSA index cache needs 128")
    try:
        return ModelSpec(
            name=name, num_layers=layers, num_attention_heads=heads, num_kv_heads=kv_heads, head_dim=head_dim,
            layer_types=layer_types, sliding_window=window, mla=mla, kv_lora_rank=kv_lora_rank if mla else None,
            hidden_size=hidden, vocab_size=_int(cfg, "vocab_size", source), source=source,
            qk_rope_head_dim=(rope if rope is not None else 64) if mla else None,
            model_type=str(top.get("model_type") or cfg.get("model_type") or "") or None,
            context_length=_int(cfg, "max_position_embeddings", source), weights=weights_from_config(top),
            linear=linear, index_head_dim=index_head_dim,
            index_kpool=(_int(cfg, "index_kpool", source) or 1) if index_head_dim is not None else 1,
            mtp_index_share=index_head_dim is not None and cfg.get("index_share_for_mtp_iteration") is True,
        )
    except ValueError as exc:
        raise UserError(f"{source}: {exc}") from None


def _linear(cfg: dict[str, Any], source: str) -> LinearAttention:
    values = {k: _int(cfg, k, source, d) or d for k, d in _LINEAR_DEFAULTS.items()}
    return LinearAttention(values["linear_num_key_heads"], values["linear_num_value_heads"],
                           values["linear_key_head_dim"], values["linear_value_head_dim"],
                           values["linear_conv_kernel_dim"],
                           ssm_bytes=2 if str(cfg.get("mamba_ssm_dtype", "")) in ("bfloat16", "float16") else 4)


def _layer_types(cfg: dict[str, Any], layers: int, source: str) -> list[LayerType]:
    raw = cfg.get("layer_types")
    if raw is None:
        interval = _int(cfg, "full_attention_interval", source)
        if interval and any(k in cfg for k in _LINEAR_DEFAULTS):
            return ["full" if (i + 1) % interval == 0 else "linear" for i in range(layers)]
        return ["full"] * layers
    if not isinstance(raw, list) or len(raw) != layers:
        raise UserError(f"{source}: layer_types: expected a list of {layers} entries (num_hidden_layers)")
    out: list[LayerType] = []
    for i, t in enumerate(raw):
        key = str(t).lower()
        if key in _SLIDING:
            out.append("sliding")
        elif key in _FULL:
            out.append("full")
        elif key in _LINEAR:
            out.append("linear")
        else:
            raise UserError(
                f"{source}: layer_types[{i}]: unsupported layer type {t!r} "
                "(expected sliding_attention, full_attention or linear_attention)"
            )
    return out
