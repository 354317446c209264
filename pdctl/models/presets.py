"""Built-in model specs, for models whose config.json is not on the machine running pdctl.

Values are from the models' published config.json files; `reference-tiny` equals the default checkpoint of
pdctl's CPU reference engine (pdctl.reference.checkpoint), so a local topology checks without a checkpoint.
"""

from __future__ import annotations

from typing import Any

from pdctl.models.hf_config import spec_from_config
from pdctl.models.spec import ModelSpec, alternating
from pdctl.models.weights import weights_from_config

# The published config.json fields the weight count reads (openai/gpt-oss-*, meta-llama/Llama-3.1-8B,
# deepseek-ai/DeepSeek-V3): sizes, experts, and how the checkpoint stores them.
_GPT_OSS: dict[str, Any] = {
    "model_type": "gpt_oss", "hidden_size": 2880, "num_attention_heads": 64, "num_key_value_heads": 8,
    "head_dim": 64, "intermediate_size": 2880, "vocab_size": 201088, "attention_bias": True,
    "tie_word_embeddings": False, "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
    "quantization_config": {"quant_method": "mxfp4"},
}
CONFIGS: dict[str, dict[str, Any]] = {
    "gpt-oss-20b": {**_GPT_OSS, "num_hidden_layers": 24, "num_local_experts": 32},
    "gpt-oss-120b": {**_GPT_OSS, "num_hidden_layers": 36, "num_local_experts": 128},
    "llama-3.1-8b": {
        "model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
        "num_key_value_heads": 8, "intermediate_size": 14336, "vocab_size": 128256, "tie_word_embeddings": False,
        "max_position_embeddings": 131072, "torch_dtype": "bfloat16",
    },
    "deepseek-v3": {
        "model_type": "deepseek_v3", "hidden_size": 7168, "num_hidden_layers": 61, "num_attention_heads": 128,
        "num_key_value_heads": 128, "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "n_routed_experts": 256, "n_shared_experts": 1, "first_k_dense_replace": 3, "kv_lora_rank": 512,
        "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128,
        "vocab_size": 129280, "max_position_embeddings": 163840, "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]},
    },
    # Qwen/Qwen3-Next-80B-A3B-Instruct config.json (hybrid linear attention: every 4th layer full attention,
    # the other 36 Gated DeltaNet layers with a per-request conv + SSM state)
    "qwen3-next-80b-a3b": {
        "model_type": "qwen3_next", "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 16,
        "num_key_value_heads": 2, "head_dim": 256, "full_attention_interval": 4, "intermediate_size": 5120,
        "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128, "linear_num_key_heads": 16,
        "linear_num_value_heads": 32, "linear_value_head_dim": 128, "moe_intermediate_size": 512,
        "num_experts": 512, "num_experts_per_tok": 10, "vocab_size": 151936, "tie_word_embeddings": False,
        "max_position_embeddings": 262144, "torch_dtype": "bfloat16",
    },
}
# deepseek-ai/DeepSeek-V3.2(-Exp) config.json: DeepSeek-V3's MLA plus the DSA indexer (model_type deepseek_v32)
CONFIGS["deepseek-v3.2"] = {**CONFIGS["deepseek-v3"], "model_type": "deepseek_v32", "index_head_dim": 128,
                            "index_n_heads": 64, "index_topk": 2048}


def _published(name: str) -> dict[str, Any]:
    cfg = CONFIGS[name]
    return {"model_type": cfg["model_type"], "context_length": cfg["max_position_embeddings"],
            "weights": weights_from_config(cfg)}


def _gpt_oss(name: str, layers: int) -> ModelSpec:
    return ModelSpec(
        name=name, num_layers=layers, num_attention_heads=64, num_kv_heads=8, head_dim=64,
        layer_types=alternating(layers), sliding_window=128, hidden_size=2880, vocab_size=201088,
        source=f"preset:{name}", **_published(name),
    )


PRESETS: dict[str, ModelSpec] = {
    "gpt-oss-20b": _gpt_oss("gpt-oss-20b", 24),
    "gpt-oss-120b": _gpt_oss("gpt-oss-120b", 36),
    "llama-3.1-8b": ModelSpec(
        name="llama-3.1-8b", num_layers=32, num_attention_heads=32, num_kv_heads=8, head_dim=128,
        layer_types=["full"] * 32, sliding_window=None, hidden_size=4096, vocab_size=128256,
        source="preset:llama-3.1-8b", **_published("llama-3.1-8b"),
    ),
    "deepseek-v3": ModelSpec(
        name="deepseek-v3", num_layers=61, num_attention_heads=128, num_kv_heads=128, head_dim=192,
        layer_types=["full"] * 61, sliding_window=None, mla=True, kv_lora_rank=512, qk_rope_head_dim=64,
        hidden_size=7168, vocab_size=129280, source="preset:deepseek-v3", **_published("deepseek-v3"),
    ),
    "qwen3-next-80b-a3b": spec_from_config(CONFIGS["qwen3-next-80b-a3b"], name="qwen3-next-80b-a3b",
                                           source="preset:qwen3-next-80b-a3b"),
    "deepseek-v3.2": spec_from_config(CONFIGS["deepseek-v3.2"], name="deepseek-v3.2", source="preset:deepseek-v3.2"),
    # `pdctl sglang-cpu init-model --shape llama` (pdctl.sglang_cpu.tinymodel): a CPU topology checks before the
    # model is made
    "sglang-cpu-tiny-llama": ModelSpec(
        name="sglang-cpu-tiny-llama", num_layers=2, num_attention_heads=4, num_kv_heads=2, head_dim=32,
        layer_types=["full"] * 2, sliding_window=None, hidden_size=128, vocab_size=1024,
        source="preset:sglang-cpu-tiny-llama", model_type="llama", context_length=4096,
    ),
    "reference-tiny": ModelSpec(
        name="reference-tiny", num_layers=4, num_attention_heads=16, num_kv_heads=8, head_dim=16,
        layer_types=alternating(4), sliding_window=32, hidden_size=128, vocab_size=258,
        source="preset:reference-tiny", model_type="pdctl-reference", context_length=4096,
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
    "qwen3-next-80b-a3b-instruct": "qwen3-next-80b-a3b",
    "qwen3-next-80b-a3b-thinking": "qwen3-next-80b-a3b",
    "deepseek-v3.2-exp": "deepseek-v3.2",
}


def find_preset(name: str) -> ModelSpec | None:
    """The preset called `name` (case-insensitive, aliases included), or None."""
    key = name.strip().lower()
    key = ALIASES.get(key, key)
    return PRESETS.get(key)
