"""Deterministic tiny checkpoints for the reference engine (config.json + model.safetensors, HF names).

Why the initialisation is shaped: exact-token tests compare TP1 with TP2/TP4 and colocated with PD, whose
float32 sums differ in the last bits. The lm_head is scaled so greedy logit margins are large (rounding never
flips an argmax) while the residual stream keeps context-dependent attention, so generated text still varies.
Printable ASCII rows of the lm_head get the full scale, other bytes less, so output reads as text.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.extras import require
from pdctl.reference.config import MODEL_TYPE, ModelConfig, default_layer_types, load_config

DEFAULT_CONFIG: dict[str, Any] = {
    "model_type": MODEL_TYPE,
    "hidden_size": 128,
    "intermediate_size": 256,
    "num_hidden_layers": 4,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 16,
    "sliding_window": 32,
    "layer_types": default_layer_types(4),
    "vocab_size": 258,
    "max_position_embeddings": 4096,
    "rope_theta": 10000.0,
    "rms_norm_eps": 1e-5,
    "bos_token_id": 256,
    "eos_token_id": 257,
}

LM_HEAD_SCALE = 25.0  # logit std for a unit-RMS final hidden state (printable rows); greedy margins >> 1e-4
WEIGHTS_FILE = "model.safetensors"


def init_checkpoint(path: str | Path, seed: int = 0, **overrides: Any) -> Path:
    """Write config.json + model.safetensors to PATH (created) deterministically from SEED; return PATH.

    OVERRIDES replace DEFAULT_CONFIG keys (e.g. num_hidden_layers=6); layer_types follows
    num_hidden_layers unless given. The same seed and config always give byte-identical weights.
    """
    doc = dict(DEFAULT_CONFIG)
    unknown = set(overrides) - set(DEFAULT_CONFIG)
    if unknown:
        raise UserError(f"unknown reference config keys: {sorted(unknown)}")
    doc.update(overrides)
    if "num_hidden_layers" in overrides and "layer_types" not in overrides:
        doc["layer_types"] = default_layer_types(int(doc["num_hidden_layers"]))
    cfg = ModelConfig.from_dict(doc, source="init_checkpoint")

    require("torch", "safetensors", what="writing a reference checkpoint")  # before creating anything
    out = Path(path)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UserError(f"cannot create checkpoint directory {out}: {exc}") from exc
    from safetensors.torch import save_file

    tensors = _init_weights(cfg, seed)
    # one metadata key only: safetensors stores metadata in a hash map, so several keys have no stable order
    save_file(tensors, str(out / WEIGHTS_FILE), metadata={"format": "pt"})
    doc_out = {**cfg.to_dict(), "pdctl_seed": seed}
    (out / "config.json").write_text(json.dumps(doc_out, indent=2) + "\n", encoding="utf-8")
    return out


def load_weights(model_dir: str | Path) -> tuple[ModelConfig, dict[str, Any]]:
    """Read a checkpoint directory: its config and every tensor (float32), checking names and shapes."""
    cfg = load_config(model_dir)
    path = Path(model_dir) / WEIGHTS_FILE
    if not path.exists():
        raise UserError(f"{path}: no weights file (create a checkpoint with `pdctl reference init-checkpoint`)")
    from safetensors.torch import load_file

    try:
        tensors = load_file(str(path))
    except Exception as exc:  # safetensors raises several types for a corrupt file
        raise UserError(f"{path}: cannot load weights: {exc}") from exc
    expected = expected_shapes(cfg)
    missing = sorted(set(expected) - set(tensors))
    if missing:
        raise UserError(f"{path}: missing tensors: {', '.join(missing[:5])}")
    for name, shape in expected.items():
        if tuple(tensors[name].shape) != shape:
            raise UserError(f"{path}: {name} has shape {tuple(tensors[name].shape)}, config implies {shape}")
    return cfg, {k: v.float() for k, v in tensors.items()}


def expected_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    """HF-style tensor names and shapes ([out, in] for linear weights) that the config implies."""
    h, d = cfg.hidden_size, cfg.head_dim
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (cfg.vocab_size, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (cfg.vocab_size, h),
    }
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = (h,)
        shapes[p + "post_attention_layernorm.weight"] = (h,)
        shapes[p + "self_attn.q_proj.weight"] = (cfg.num_attention_heads * d, h)
        shapes[p + "self_attn.k_proj.weight"] = (cfg.num_key_value_heads * d, h)
        shapes[p + "self_attn.v_proj.weight"] = (cfg.num_key_value_heads * d, h)
        shapes[p + "self_attn.o_proj.weight"] = (h, cfg.num_attention_heads * d)
        shapes[p + "mlp.gate_proj.weight"] = (cfg.intermediate_size, h)
        shapes[p + "mlp.up_proj.weight"] = (cfg.intermediate_size, h)
        shapes[p + "mlp.down_proj.weight"] = (h, cfg.intermediate_size)
    return shapes


def _init_weights(cfg: ModelConfig, seed: int) -> dict[str, Any]:
    import torch

    gen = torch.Generator().manual_seed(seed)
    out: dict[str, Any] = {}
    for name, shape in expected_shapes(cfg).items():
        if name.endswith("norm.weight"):
            t = 1.0 + 0.1 * torch.randn(shape, generator=gen)
        elif name == "model.embed_tokens.weight":
            t = torch.randn(shape, generator=gen)
        elif name == "lm_head.weight":
            # a unit-RMS final hidden state gives logits with std ~ LM_HEAD_SCALE (times the norm weight)
            t = torch.randn(shape, generator=gen) * (LM_HEAD_SCALE / shape[1] ** 0.5)
            row_scale = torch.full((shape[0],), 0.55)
            printable = list(range(32, 127)) + [10]
            row_scale[printable] = 1.0
            row_scale[cfg.eos_token_id] = 0.8
            row_scale[cfg.bos_token_id] = 0.0  # BOS is never generated
            t = t * row_scale[:, None]
        elif "attn" in name and ("q_proj" in name or "k_proj" in name):
            t = torch.randn(shape, generator=gen) * (2.0 / shape[1] ** 0.5)
        else:
            t = torch.randn(shape, generator=gen) / shape[1] ** 0.5
        out[name] = t.float().contiguous()
    return out
