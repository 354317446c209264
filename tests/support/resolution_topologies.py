"""A seeded generator of realistic PD topologies for the start-up differential (tests/sglang/test_resolution.py).

Each draw is a real pdctl topology (models x GPUs x transfer backends x the flags users set in PD: parallelism,
DP attention, page size, KV dtype, chunked prefill, memory fraction, CUDA-graph settings, radix and offload on
decode, HiCache, retraction backup), rendered by pdctl; the per-role command lines of that deployment are what
SGLang's own resolution judges. Models are given by a real config.json written to a directory (the model's
published architecture fields), so SGLang's ModelConfig reads the same file pdctl reads.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.sglang.memory import GPU_MEMORY_MIB
from pdctl.topology import build_topology

# The GPUs pdctl knows: compute capability (nvidia-smi's compute_cap) and memory (pdctl.sglang.memory).
GPUS: dict[str, tuple[int, int]] = {"h100": (9, 0), "h200": (9, 0), "b200": (10, 0), "gb200": (10, 0),
                                    "gb300": (10, 3)}
# nvidia-smi's names (torch.cuda.get_device_name): SGLang reads the MNNVL fabric (GB200/GB300) off them.
GPU_NAMES = {"h100": "NVIDIA H100 80GB HBM3", "h200": "NVIDIA H200", "b200": "NVIDIA B200", "gb200": "NVIDIA GB200",
             "gb300": "NVIDIA GB300"}
GPUS_PER_NODE = {"h100": 8, "h200": 8, "b200": 8, "gb200": 4, "gb300": 4}

# Published config.json fields (meta-llama/Llama-3.1-8B-Instruct, Qwen/Qwen3-32B).
MODELS: dict[str, dict[str, Any]] = {
    "llama-3.1-8b": {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 4096,
                     "intermediate_size": 14336, "num_attention_heads": 32, "num_key_value_heads": 8,
                     "num_hidden_layers": 32, "vocab_size": 128256, "max_position_embeddings": 131072,
                     "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "torch_dtype": "bfloat16", "head_dim": 128,
                     "hidden_act": "silu", "tie_word_embeddings": False},
    "qwen3-32b": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
                  "intermediate_size": 25600, "num_attention_heads": 64, "num_key_value_heads": 8,
                  "num_hidden_layers": 64, "vocab_size": 151936, "max_position_embeddings": 40960,
                  "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "torch_dtype": "bfloat16", "head_dim": 128,
                  "hidden_act": "silu", "tie_word_embeddings": False},
}

# Decode-side flag sets users write in PD recipes (args: of the decode role).
DECODE_EXTRAS: list[dict[str, Any]] = [
    {},
    {"disaggregation-decode-enable-offload-kvcache": True},
    {"disaggregation-decode-enable-offload-kvcache": True, "hicache-storage-backend": "file"},
    {"disaggregation-decode-enable-offload-kvcache": True, "hicache-storage-backend": "file",
     "disaggregation-decode-retraction-backup": "host_pool"},
    {"disaggregation-decode-retraction-backup": "host_pool"},
    {"cuda-graph-max-bs": 256},
    {"disable-cuda-graph": True},
]
PREFILL_EXTRAS: list[dict[str, Any]] = [{}, {"disable-cuda-graph": True}, {"max-running-requests": 128}]


def write_models(root: Path) -> dict[str, Path]:
    """One directory with a config.json per model."""
    out = {}
    for name, cfg in MODELS.items():
        path = root / name
        path.mkdir(parents=True, exist_ok=True)
        (path / "config.json").write_text(json.dumps(cfg))
        out[name] = path
    return out


def draw(rng: random.Random, models: dict[str, Path], version: str) -> dict[str, Any]:
    """One topology document."""
    model = rng.choice(sorted(models))
    gpu = rng.choice(sorted(GPUS))
    per_node = GPUS_PER_NODE[gpu]
    tps = [t for t in (1, 2, 4, 8) if t <= per_node]
    kv = rng.choice(["auto", "auto", "fp8_e4m3", "mxfp8"])
    server: dict[str, Any] = {"page_size": rng.choice([1, 16, 32, 64]), "kv_cache_dtype": kv}
    if rng.random() < 0.3:
        server["mem_fraction_static"] = rng.choice([0.7, 0.85, 0.9])
    prefill: dict[str, Any] = {"nodes": ["p0"], "tp": rng.choice(tps), "args": dict(rng.choice(PREFILL_EXTRAS))}
    if rng.random() < 0.3:
        prefill["chunked_prefill_size"] = rng.choice([4096, 8192, 16384])
    decode: dict[str, Any] = {"nodes": ["d0"], "tp": rng.choice(tps), "args": dict(rng.choice(DECODE_EXTRAS))}
    if rng.random() < 0.2:
        decode["radix_cache"] = True
    return {
        "name": f"gen-{model.replace('.', '-')}-{gpu}",
        "engine": {"kind": "sglang", "version": version},
        "model": {"path": str(models[model])},
        "nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": gpu, "gpus": per_node},
                  {"name": "d0", "host": "10.0.0.12", "gpu": gpu, "gpus": per_node}],
        "transfer": {"backend": rng.choice(["nixl", "mooncake"])},
        "server": server, "prefill": prefill, "decode": decode,
    }


def gpu_facts(kind: str) -> dict[str, Any]:
    """What the oracle supplies in place of probing the device."""
    return {"capability": list(GPUS[kind]), "count": GPUS_PER_NODE[kind], "memory_mib": GPU_MEMORY_MIB[kind],
            "name": GPU_NAMES[kind]}


def generate(seed: int, n: int, models: dict[str, Path], version: str) -> list[dict[str, Any]]:
    """N drawn topologies, rendered: [{doc, deployment, spec, gpu, roles: {role: argv}}]."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        doc = draw(rng, models, version)
        topo = build_topology(doc, source="<generated>")
        deployment = render(topo)
        roles = {w.role: w.argv for w in deployment.workers if w.node_rank == 0}
        out.append({"doc": doc, "deployment": deployment, "spec": resolve_model_spec(topo.model),
                    "gpu": gpu_facts(doc["nodes"][0]["gpu"]), "roles": roles})
    return out


def sglang_argv(argv: list[str]) -> list[str]:
    """The server's own arguments: what follows `-m sglang.launch_server` in a rendered command."""
    if "sglang.launch_server" in argv:
        return argv[argv.index("sglang.launch_server") + 1:]
    raise ValueError(f"not an SGLang server command: {argv[:4]}")
