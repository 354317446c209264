"""The reference model's configuration: HF-style config.json keys <-> a typed dataclass.

The keys are the ones pdctl's model-spec resolution reads for any model (ARCHITECTURE.md), so check-compat
treats a reference checkpoint exactly like a real one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.jsonfiles import read_json_object

MODEL_TYPE = "pdctl-reference"
KV_LAYOUTS = ("nhd", "hnd", "vectorized_5d")


@dataclass(frozen=True)
class ModelConfig:
    """Shape of the reference transformer (validated: heads divide evenly, head_dim even for RoPE)."""

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    sliding_window: int
    layer_types: tuple[str, ...]
    vocab_size: int
    max_position_embeddings: int
    rope_theta: float
    rms_norm_eps: float
    bos_token_id: int
    eos_token_id: int

    def is_sliding(self, layer: int) -> bool:
        """Whether LAYER uses sliding-window attention."""
        return self.layer_types[layer] == "sliding_attention"

    @classmethod
    def from_dict(cls, doc: dict[str, Any], source: str = "config") -> ModelConfig:
        """Build and validate from a config.json document; bad values raise UserError naming SOURCE."""
        try:
            n_layers = int(doc["num_hidden_layers"])
            layer_types = tuple(doc.get("layer_types") or default_layer_types(n_layers))
            cfg = cls(
                hidden_size=int(doc["hidden_size"]),
                intermediate_size=int(doc["intermediate_size"]),
                num_hidden_layers=n_layers,
                num_attention_heads=int(doc["num_attention_heads"]),
                num_key_value_heads=int(doc["num_key_value_heads"]),
                head_dim=int(doc["head_dim"]),
                sliding_window=int(doc["sliding_window"]),
                layer_types=layer_types,
                vocab_size=int(doc["vocab_size"]),
                max_position_embeddings=int(doc["max_position_embeddings"]),
                rope_theta=float(doc["rope_theta"]),
                rms_norm_eps=float(doc.get("rms_norm_eps", 1e-5)),
                bos_token_id=int(doc.get("bos_token_id", 256)),
                eos_token_id=int(doc.get("eos_token_id", 257)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise UserError(f"{source}: invalid reference-model config: {exc!r}") from exc
        problems = cfg.problems()
        if problems:
            raise UserError(f"{source}: invalid reference-model config: " + "; ".join(problems))
        return cfg

    def problems(self) -> list[str]:
        """Human-readable reasons this shape cannot be built (empty when fine)."""
        out = []
        if self.num_attention_heads % self.num_key_value_heads:
            out.append("num_attention_heads must be a multiple of num_key_value_heads")
        if self.head_dim % 2:
            out.append("head_dim must be even (RoPE)")
        if len(self.layer_types) != self.num_hidden_layers:
            out.append("layer_types must have one entry per layer")
        bad = {t for t in self.layer_types if t not in ("sliding_attention", "full_attention")}
        if bad:
            out.append(f"unknown layer_types {sorted(bad)}")
        if self.sliding_window < 1:
            out.append("sliding_window must be >= 1")
        if self.vocab_size < 258:
            out.append("vocab_size must be >= 258 (bytes + BOS + EOS)")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The config.json document (HF-style keys, plus model_type/architectures)."""
        return {
            "model_type": MODEL_TYPE,
            "architectures": ["PdctlReferenceForCausalLM"],
            "hidden_size": self.hidden_size,
            "intermediate_size": self.intermediate_size,
            "num_hidden_layers": self.num_hidden_layers,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "head_dim": self.head_dim,
            "sliding_window": self.sliding_window,
            "layer_types": list(self.layer_types),
            "vocab_size": self.vocab_size,
            "max_position_embeddings": self.max_position_embeddings,
            "rope_theta": self.rope_theta,
            "rms_norm_eps": self.rms_norm_eps,
            "bos_token_id": self.bos_token_id,
            "eos_token_id": self.eos_token_id,
            "torch_dtype": "float32",
            "tie_word_embeddings": False,
        }


def default_layer_types(num_layers: int) -> list[str]:
    """gpt-oss order: sliding, full, sliding, full, ..."""
    return ["sliding_attention" if i % 2 == 0 else "full_attention" for i in range(num_layers)]


def load_config(model_dir: str | Path) -> ModelConfig:
    """Read DIR/config.json; a missing or malformed file is a UserError (exit 2), not a traceback."""
    path = Path(model_dir) / "config.json"
    doc = read_json_object(
        path, "config.json", missing_hint="no config.json (create one with `pdctl reference init-checkpoint DIR`)"
    )
    return ModelConfig.from_dict(doc, source=str(path))


def validate_tp(cfg: ModelConfig, tp: int) -> None:
    """Reject TP sizes SGLang could not load for this model (whole heads per rank), with the reason."""
    h, q = cfg.num_key_value_heads, cfg.num_attention_heads
    if tp < 1:
        raise UserError(f"--tp must be >= 1, got {tp}")
    if q % tp:
        raise UserError(f"--tp {tp}: num_attention_heads={q} is not divisible by the TP size")
    if h % tp and tp % h:
        raise UserError(f"--tp {tp}: num_key_value_heads={h} and the TP size do not divide one another")
    if cfg.intermediate_size % tp:
        raise UserError(f"--tp {tp}: intermediate_size={cfg.intermediate_size} is not divisible by the TP size")
