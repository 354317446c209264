"""How many bytes of weights each GPU holds: parameter counts by group, their storage bytes, how TP shards them.

check-compat's KV-capacity estimate (pdctl/compat/capacity.py) subtracts a rank's weights from the memory
SGLang gives the static pool (`mem_fraction_static`); what is left is the KV cache. The counts come from the
model's config.json (or the published config of a preset), the bytes per parameter from its dtype and
quantization: gpt-oss stores its MoE experts in MXFP4 (4 bits + one 8-bit scale per 32 values = 4.25
bits) and everything else in bf16; DeepSeek-V3 stores its linear layers in FP8 with one fp32 scale per
128x128 block. A quantization pdctl does not know leaves the weights unknown (no estimate, said so), never
guessed.

How SGLang shards (what one rank holds): attention projections by the attention TP group (K/V replicated
when attention TP exceeds the KV heads), the input embedding by attention TP (VocabParallelEmbedding with
use_attn_tp_group under DP attention), the LM head, dense MLPs and MoE experts by the whole TP group
(EP x MoE-TP = TP, so experts split the same with or without EP), MLA's low-rank A projections, norms and
routers replicated.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

Shard = Literal["tp", "attn_tp", "kv", "none"]
GIB = 1 << 30

# bytes per parameter of a storage format (scales included)
BF16 = 2.0
FP32 = 4.0
FP8_BLOCK128 = 1.0 + 4.0 / (128 * 128)  # e4m3 + one fp32 scale per 128x128 block (DeepSeek's weight_block_size)
MXFP4 = 0.5 + 1.0 / 32  # 4-bit e2m1 + one e8m0 scale per 32 values (OCP MX)
_DTYPES = {"bfloat16": BF16, "bf16": BF16, "float16": BF16, "fp16": BF16, "half": BF16, "float32": FP32,
           "fp32": FP32, "float": FP32}


@dataclass(frozen=True)
class WeightGroup:
    """Parameters that are stored and sharded alike: `params` in all, `bytes_per_param`, `shard` over which
    group of ranks (tp: the whole TP group; attn_tp: the attention TP group; kv: K/V heads over attention TP,
    replicated past the head count; none: every rank holds them all)."""

    name: str
    params: int
    bytes_per_param: float
    shard: Shard


@dataclass(frozen=True)
class Weights:
    """A model's weights as groups; `note` says where the bytes per parameter came from."""

    groups: tuple[WeightGroup, ...]
    note: str = ""

    @property
    def params(self) -> int:
        return sum(g.params for g in self.groups)

    @property
    def total_bytes(self) -> float:
        return sum(g.params * g.bytes_per_param for g in self.groups)

    def bytes_per_rank(self, *, tp: int, attn_tp: int, kv_heads: int) -> float:
        """What one rank of a server with TP (and attention TP) holds, in bytes."""
        out = 0.0
        for g in self.groups:
            full = g.params * g.bytes_per_param
            if g.shard == "tp":
                out += full / max(1, tp)
            elif g.shard == "attn_tp":
                out += full / max(1, attn_tp)
            elif g.shard == "kv":  # K/V projections: replicated once attention TP exceeds the KV heads
                out += full * max(1, kv_heads // max(1, attn_tp)) / max(1, kv_heads)
            else:
                out += full
        return out


def _get(cfg: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for key in keys:
        if cfg.get(key) is not None:
            return cfg[key]
    return default


def weights_from_config(cfg: dict[str, Any], quantization: str | None = None, dtype: str | None = None) -> Weights | None:
    """The weight groups of a Hugging Face config.json (`text_config` of a multimodal one), or None when the
    shape or the storage format is not one pdctl can count (an unknown quantization, missing sizes).

    QUANTIZATION / DTYPE: SGLang's --quantization / --dtype when the command line sets them (they override
    the checkpoint's storage for the linear layers / everything)."""
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = cfg["text_config"]
    try:
        return _count(cfg, quantization, dtype)
    except (KeyError, TypeError, ValueError):
        return None


def _storage(cfg: dict[str, Any], quantization: str | None, dtype: str | None) -> tuple[float, float, float, str] | None:
    """(bytes per param of: unquantized tensors, dense linear layers, MoE experts) and a note; None if unknown."""
    base = _DTYPES.get(str(dtype or cfg.get("torch_dtype") or cfg.get("dtype") or "bfloat16").lower())
    if base is None:
        return None
    qcfg = cfg.get("quantization_config") or {}
    method = str(quantization or qcfg.get("quant_method") or "").lower() or None
    if method is None:
        return base, base, base, f"{base:g} B/param (unquantized)"
    if method == "mxfp4":
        return base, base, MXFP4, "MoE experts MXFP4 (4.25 bits/param), the rest bf16"
    if method == "fp8":
        return base, FP8_BLOCK128, FP8_BLOCK128, "linear layers FP8 (+ block scales), embeddings/norms bf16"
    return None


def _count(cfg: dict[str, Any], quantization: str | None, dtype: str | None) -> Weights | None:
    storage = _storage(cfg, quantization, dtype)
    if storage is None:
        return None
    plain, linear, expert_b, note = storage
    hidden = int(cfg["hidden_size"])
    layers = int(cfg["num_hidden_layers"])
    heads = int(cfg["num_attention_heads"])
    kv = int(cfg.get("num_key_value_heads") or heads)
    vocab = int(cfg["vocab_size"])
    groups: list[WeightGroup] = [WeightGroup("embedding", vocab * hidden, plain, "attn_tp")]
    if not cfg.get("tie_word_embeddings", False):
        groups.append(WeightGroup("lm_head", vocab * hidden, plain, "tp"))
    groups += _attention(cfg, hidden, layers, heads, kv, linear)
    groups += _mlp(cfg, hidden, layers, linear, expert_b)
    groups.append(WeightGroup("norms", layers * 2 * hidden + hidden, plain, "none"))
    return Weights(tuple(g for g in groups if g.params), note)


def _attention(cfg: dict[str, Any], hidden: int, layers: int, heads: int, kv: int, b: float) -> list[WeightGroup]:
    if cfg.get("kv_lora_rank"):  # MLA (DeepSeek): low-rank A projections replicated, B and O sharded
        rank, rope = int(cfg["kv_lora_rank"]), int(cfg.get("qk_rope_head_dim") or 64)
        nope, v = int(cfg.get("qk_nope_head_dim") or 128), int(cfg.get("v_head_dim") or 128)
        q_rank = cfg.get("q_lora_rank")
        q = heads * (nope + rope)
        q_params = (hidden * int(q_rank) + int(q_rank) * q) if q_rank else hidden * q
        a = hidden * (rank + rope) + (hidden * int(q_rank) if q_rank else 0)
        sharded = q_params - (hidden * int(q_rank) if q_rank else 0) + rank * heads * (nope + v) + heads * v * hidden
        return [WeightGroup("attention (MLA A projections)", layers * a, b, "none"),
                WeightGroup("attention", layers * sharded, b, "attn_tp")]
    head_dim = int(cfg.get("head_dim") or hidden // heads)
    bias = 1 if cfg.get("attention_bias") else 0
    q_o = 2 * hidden * heads * head_dim + bias * (heads * head_dim + hidden)
    k_v = 2 * hidden * kv * head_dim + bias * 2 * kv * head_dim
    return [WeightGroup("attention (Q, O)", layers * q_o, b, "attn_tp"),
            WeightGroup("attention (K, V)", layers * k_v, b, "kv")]


def _mlp(cfg: dict[str, Any], hidden: int, layers: int, linear: float, expert_b: float) -> list[WeightGroup]:
    experts = _get(cfg, "num_local_experts", "num_experts", "n_routed_experts")
    if not experts:
        inter = int(cfg["intermediate_size"])
        return [WeightGroup("MLP", layers * 3 * hidden * inter, linear, "tp")]
    experts = int(experts)
    moe_inter = int(_get(cfg, "moe_intermediate_size", "intermediate_size"))
    dense = int(cfg.get("first_k_dense_replace") or 0)
    moe_layers = layers - dense
    per_expert = 3 * hidden * moe_inter + (2 * moe_inter + hidden if cfg.get("model_type") == "gpt_oss" else 0)
    shared = int(cfg.get("n_shared_experts") or 0)
    groups = [WeightGroup("MoE experts", moe_layers * experts * per_expert, expert_b, "tp"),
              WeightGroup("MoE router", moe_layers * (hidden * experts + experts), BF16, "none")]
    if shared:
        groups.append(WeightGroup("shared experts", moe_layers * shared * 3 * hidden * moe_inter, linear, "tp"))
    if dense:
        groups.append(WeightGroup("dense MLP", dense * 3 * hidden * int(cfg["intermediate_size"]), linear, "tp"))
    return groups
