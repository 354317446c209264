"""Built-in model specs, for models whose config.json is not on the machine running pdctl.

Values are from the models' published config.json files; `reference-tiny` equals the default checkpoint of
pdctl's CPU reference engine (pdctl.reference.checkpoint), so a local topology checks without a checkpoint.
"""

from __future__ import annotations

from pdctl.models.spec import ModelSpec, alternating


def _gpt_oss(name: str, layers: int) -> ModelSpec:
    return ModelSpec(
        name=name, num_layers=layers, num_attention_heads=64, num_kv_heads=8, head_dim=64,
        layer_types=alternating(layers), sliding_window=128, hidden_size=2880, vocab_size=201088,
        source=f"preset:{name}",
    )


PRESETS: dict[str, ModelSpec] = {
    "gpt-oss-20b": _gpt_oss("gpt-oss-20b", 24),
    "gpt-oss-120b": _gpt_oss("gpt-oss-120b", 36),
    "llama-3.1-8b": ModelSpec(
        name="llama-3.1-8b", num_layers=32, num_attention_heads=32, num_kv_heads=8, head_dim=128,
        layer_types=["full"] * 32, sliding_window=None, hidden_size=4096, vocab_size=128256,
        source="preset:llama-3.1-8b",
    ),
    "deepseek-v3": ModelSpec(
        name="deepseek-v3", num_layers=61, num_attention_heads=128, num_kv_heads=128, head_dim=192,
        layer_types=["full"] * 61, sliding_window=None, mla=True, kv_lora_rank=512, qk_rope_head_dim=64,
        hidden_size=7168, vocab_size=129280, source="preset:deepseek-v3",
    ),
    "reference-tiny": ModelSpec(
        name="reference-tiny", num_layers=4, num_attention_heads=16, num_kv_heads=8, head_dim=16,
        layer_types=alternating(4), sliding_window=32, hidden_size=128, vocab_size=258,
        source="preset:reference-tiny",
    ),
}

# Other names people use for the same architectures (matched case-insensitively, like preset names).
ALIASES: dict[str, str] = {
    "llama-3.1-8b-instruct": "llama-3.1-8b",
    "meta-llama-3.1-8b": "llama-3.1-8b",
    "meta-llama-3.1-8b-instruct": "llama-3.1-8b",
    "deepseek-v3-0324": "deepseek-v3",
    "deepseek-v3-base": "deepseek-v3",
    "deepseek-r1": "deepseek-v3",
    "deepseek-r1-0528": "deepseek-v3",
}


def find_preset(name: str) -> ModelSpec | None:
    """The preset called `name` (case-insensitive, aliases included), or None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return PRESETS.get(key)
