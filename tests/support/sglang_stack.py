"""Rehearsals on SGLang's own transfer stack for tests: small model shapes, topologies around them, and the
side interpreter with the transfer libraries (PDCTL_SGLANG_PYTHON / .venv-sglang, built by `make sglang-env`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pdctl.topology import build_topology
from tests.support.topo_factory import merge

# Small models of the kinds the agreement matrix sweeps (4 layers: cheap pools, every path exercised).
MODELS: dict[str, dict[str, Any]] = {
    # hybrid sliding-window like gpt-oss: alternating window/full layers, GQA with 8 KV heads
    "swa": {"num_hidden_layers": 4, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 64,
            "hidden_size": 1024, "vocab_size": 1000, "sliding_window": 32,
            "layer_types": ["sliding_attention", "full_attention"] * 2},
    "mha": {"num_hidden_layers": 4, "num_attention_heads": 4, "num_key_value_heads": 4, "head_dim": 64,
            "hidden_size": 256, "vocab_size": 1000},
    "mqa": {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 1, "head_dim": 64,
            "hidden_size": 512, "vocab_size": 1000},
    "gqa2": {"num_hidden_layers": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
             "hidden_size": 512, "vocab_size": 1000},
    "gqa6": {"num_hidden_layers": 4, "num_attention_heads": 12, "num_key_value_heads": 6, "head_dim": 64,
             "hidden_size": 768, "vocab_size": 1000},
    # hybrid linear attention like Qwen3-Next: Qwen/Qwen3-Next-80B-A3B-Instruct's config.json field names
    # (tests/models/configs/qwen3-next-trimmed.config.json), shrunk: 4 layers, every 2nd full attention (2 KV
    # heads), Gated DeltaNet layers with 2 key / 4 value heads of 32, conv kernel 4
    "linear": {"architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "num_hidden_layers": 4,
               "full_attention_interval": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
               "hidden_size": 256, "vocab_size": 1000, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 32,
               "linear_num_key_heads": 2, "linear_num_value_heads": 4, "linear_value_head_dim": 32},
}


def write_models(folder: Path) -> dict[str, Path]:
    """Each model's config.json under FOLDER; returns name -> config path."""
    out = {}
    for name, cfg in MODELS.items():
        path = folder / f"{name}.config.json"
        path.write_text(json.dumps(cfg))
        out[name] = path
    return out


def topology(config: Path, *, prefill_tp: int, decode_tp: int, backend: str, page_size: int = 16,
             **over: Any) -> Any:
    """An SGLang 0.5.23 PD topology of one prefill and one decode node (H100s: what check-compat judges)."""
    base = {
        "name": f"rehearsal-{config.name.split('.')[0]}-p{prefill_tp}-d{decode_tp}-{backend}",
        "engine": {"kind": "sglang", "version": "0.5.23"},
        "model": {"path": f"pdctl-test/{config.name.split('.')[0]}", "config": str(config)},
        "nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 8},
                  {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8}],
        "transfer": {"backend": backend, "protocol": "tcp"},
        "server": {"page_size": page_size},
        "prefill": {"nodes": ["p0"], "tp": prefill_tp},
        "decode": {"nodes": ["d0"], "tp": decode_tp},
    }
    return build_topology(merge(base, over), source="<rehearsal>")
