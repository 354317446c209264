"""ModelSpec: the few facts about a model that decide whether a PD topology can work and what moves.

check-compat needs KV heads (head slicing), layers split into full/sliding-window (what SGLang sends for each),
the window, and MLA or not (MLA KV is one latent per token, replicated across TP, so the head rules do not
apply). Everything else about the model is irrelevant to PD compatibility and is deliberately left out.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # pragma: no cover
    from pdctl.models.weights import Weights

LayerType = Literal["sliding", "full"]


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

    def __post_init__(self) -> None:
        if len(self.layer_types) != self.num_layers:
            raise ValueError(f"{self.name}: {len(self.layer_types)} layer_types for {self.num_layers} layers")
        for key in ("num_layers", "num_attention_heads", "num_kv_heads", "head_dim"):
            if getattr(self, key) < 1:
                raise ValueError(f"{self.name}: {key} must be positive")

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
        return d


def alternating(num_layers: int, first: LayerType = "sliding") -> list[LayerType]:
    """gpt-oss style layer types: sliding/full alternating, starting with `first`."""
    other: LayerType = "full" if first == "sliding" else "sliding"
    return [first if i % 2 == 0 else other for i in range(num_layers)]
