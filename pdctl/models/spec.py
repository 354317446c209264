"""ModelSpec: the few facts about a model that decide whether a PD topology can work and what moves.

check-compat needs KV heads (head slicing), layers split into full/sliding-window/linear-attention (what
SGLang sends for each), the window, and MLA or not (MLA KV is one latent per token, replicated across TP, so
the head rules do not apply). Two more families carry per-request or per-token state besides the KV pages, each
a state component of its own in SGLang's PD transfer (disaggregation/utils.py::setup_state_kv_args):
- hybrid linear attention (Qwen3-Next, Qwen3.5: Gated DeltaNet layers, `linear_attention` in layer_types):
  StateType.MAMBA, one conv + one temporal (SSM) state per request per linear layer, head-sharded over attention
  TP (configs/mamba_utils.py::Mamba2StateShape.create; with unequal TP SGLang slices it per rank);
- DSA/NSA sparse attention (DeepSeek-V3.2): StateType.DSA, the indexer's key cache, index_head_dim fp8 bytes
  plus one fp32 scale per 128 per token per layer (mem_cache/index_key_cache.py), replicated on every rank.
Everything else about the model is irrelevant to PD compatibility and is deliberately left out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pragma: no cover
    from pdctl.models.weights import Weights

LayerType = Literal["sliding", "full", "linear"]
# SGLang's DSA index key cache: fp8 keys plus one fp32 scale per quant block (DSATokenToKVPool.quant_block_size)
DSA_QUANT_BLOCK = 128
DSA_SCALE_BYTES = 4


@dataclass(frozen=True)
class LinearAttention:
    """The Gated DeltaNet (Mamba2-style) state shape of a hybrid linear-attention model, from config.json's
    linear_* fields; SGLang's default dtypes: conv state bf16 (SGLANG_MAMBA_CONV_DTYPE), temporal (SSM)
    state float32 (mamba_ssm_dtype / SGLANG_MAMBA_SSM_DTYPE)."""

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int
    conv_bytes: int = 2
    ssm_bytes: int = 4

    @property
    def conv_dim(self) -> int:
        """Channels of the conv state: cat([query, key, value]) (Mamba2StateShape.create)."""
        return self.num_value_heads * self.value_head_dim + 2 * self.num_key_heads * self.key_head_dim

    def conv_state_bytes(self, tp: int = 1) -> int:
        """One request's conv state of one layer on one rank of attention TP TP: [conv_dim / tp, kernel - 1]."""
        return self.conv_dim // tp * (self.conv_kernel - 1) * self.conv_bytes

    def temporal_state_bytes(self, tp: int = 1) -> int:
        """One request's SSM state of one layer on one rank: [value heads / tp, value_head_dim, key_head_dim]."""
        return self.num_value_heads // tp * self.value_head_dim * self.key_head_dim * self.ssm_bytes


@dataclass(frozen=True)
class ModelSpec:
    """Resolved attention shape of a model; `source` says where it came from (file path or preset name)."""

    name: str
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    layer_types: list[LayerType]
    sliding_window: int | None
    mla: bool = False
    kv_lora_rank: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None
    source: str = ""
    qk_rope_head_dim: int | None = None  # MLA: the rope part cached next to the latent (DeepSeek: 64)
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    # For the field-incident rules: config.json's model_type (gpt_oss, deepseek_v3, ...), the context length
    # SGLang serves by default (max_position_embeddings), the weights per group (KV-capacity estimate).
    model_type: str | None = None
    context_length: int | None = None
    weights: Weights | None = field(default=None, compare=False)
    linear: LinearAttention | None = None  # hybrid linear attention: the state shape of its linear layers
    index_head_dim: int | None = None  # DSA/NSA sparse attention: the indexer's key width (DeepSeek-V3.2: 128)
    index_kpool: int = 1  # DSA: index keys pooled per group (config.json `index_kpool`; SGLang's page is 64 x it)
    mtp_index_share: bool = False  # DSA: config.json `index_share_for_mtp_iteration` (GLM-5.2's MTP reuses the top-k)

    def __post_init__(self) -> None:
        if len(self.layer_types) != self.num_layers:
            raise ValueError(f"{self.name}: {len(self.layer_types)} layer_types for {self.num_layers} layers")
        for key in ("num_layers", "num_attention_heads", "num_kv_heads", "head_dim"):
            if getattr(self, key) < 1:
                raise ValueError(f"{self.name}: {key} must be positive")
        if "linear" in self.layer_types and self.linear is None:
            raise ValueError(f"{self.name}: linear_attention layers need the linear_* state fields")
        if not self.kv_layers:
            raise ValueError(f"{self.name}: no attention layer with a KV cache")

    @property
    def linear_layers(self) -> list[int]:
        """Indices of linear-attention layers (no KV pages: a per-request state)."""
        return [i for i, t in enumerate(self.layer_types) if t == "linear"]

    @property
    def kv_layers(self) -> list[int]:
        """Indices of the layers with a KV cache (full and sliding-window): what the KV pages hold."""
        return [i for i, t in enumerate(self.layer_types) if t != "linear"]

    @property
    def hybrid_linear(self) -> bool:
        """True for a hybrid linear-attention model (SGLang's HybridLinearKVPool, StateType.MAMBA)."""
        return bool(self.linear_layers)

    @property
    def dsa(self) -> bool:
        """True for a DSA/NSA sparse-attention model (SGLang's DSATokenToKVPool, StateType.DSA)."""
        return self.index_head_dim is not None

    def state_bytes_per_request(self, tp: int = 1) -> int:
        """The mamba/conv state one request holds on one rank of attention TP TP, over all linear layers."""
        if self.linear is None:
            return 0
        per_layer = self.linear.conv_state_bytes(tp) + self.linear.temporal_state_bytes(tp)
        return per_layer * len(self.linear_layers)

    def indexer_bytes_per_token(self) -> int:
        """The DSA indexer key cache of one token over all KV layers (on every rank: not sharded by TP)."""
        if self.index_head_dim is None:
            return 0
        per_layer = self.index_head_dim + self.index_head_dim // DSA_QUANT_BLOCK * DSA_SCALE_BYTES
        return per_layer * len(self.kv_layers)

    @property
    def hybrid_swa(self) -> bool:
        """True when some layers are sliding-window and some are not (SGLang's hybrid SWA memory pools)."""
        return self.sliding_window is not None and "sliding" in self.layer_types

    @property
    def full_layers(self) -> list[int]:
        """Indices of full-attention layers."""
        return [i for i, t in enumerate(self.layer_types) if t == "full"]

    @property
    def swa_layers(self) -> list[int]:
        """Indices of sliding-window layers."""
        return [i for i, t in enumerate(self.layer_types) if t == "sliding"]

    def kv_elems_per_token(self, heads: int | None = None) -> int:
        """Cache elements one token needs in one layer's K (or, for MLA, its single latent buffer).

        For MHA/GQA that is `heads * head_dim` (default: all KV heads); for MLA it is the latent plus its rope
        part, independent of TP.
        """
        if self.mla:
            return int(self.kv_lora_rank or 0) + int(self.qk_rope_head_dim or 0)
        return (self.num_kv_heads if heads is None else heads) * self.head_dim

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly view, with the derived full/SWA split that check-compat shows."""
        d = asdict(self)
        d.pop("extra", None)
        d.pop("weights", None)
        d["hybrid_swa"] = self.hybrid_swa
        d["full_layers"] = self.full_layers
        d["swa_layers"] = self.swa_layers
        d["linear_layers"] = self.linear_layers
        d["state_bytes_per_request"] = self.state_bytes_per_request()
        d["indexer_bytes_per_token"] = self.indexer_bytes_per_token()
        return d


def alternating(num_layers: int, first: LayerType = "sliding") -> list[LayerType]:
    """gpt-oss style layer types: sliding/full alternating, starting with `first`."""
    other: LayerType = "full" if first == "sliding" else "sliding"
    return [first if i % 2 == 0 else other for i in range(num_layers)]
