"""A seeded generator of realistic PD topologies for the start-up differential (tests/sglang/test_resolution.py).

Each draw is a real pdctl topology (models: dense GQA, MoE, MLA, DSA, hybrid linear attention x GPUs x transfer backends x the flags users set
in PD: TP, PP, DP attention, MoE / EP backends, speculative decoding, page size, KV dtype and layout, attention
backends, chunked prefill, memory fraction, CUDA-graph settings, radix and offload on decode, HiCache /
HiSparse, retraction backup), rendered by pdctl; the per-role command lines of that deployment are what
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
    # Qwen/Qwen3-30B-A3B (MoE: 128 experts, 8 per token)
    "qwen3-30b-a3b": {"architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "hidden_size": 2048,
                      "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
                      "num_experts_per_tok": 8, "norm_topk_prob": True, "decoder_sparse_step": 1,
                      "mlp_only_layers": [], "num_attention_heads": 32, "num_key_value_heads": 4, "head_dim": 128,
                      "num_hidden_layers": 48, "vocab_size": 151936, "max_position_embeddings": 40960,
                      "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "torch_dtype": "bfloat16",
                      "hidden_act": "silu", "tie_word_embeddings": False},
    # deepseek-ai/DeepSeek-V3 (MLA, 256 routed experts, FP8 block-quantized weights; pdctl's deepseek-v3 preset)
    "deepseek-v3": {"architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3", "hidden_size": 7168,
                    "intermediate_size": 18432, "moe_intermediate_size": 2048, "n_routed_experts": 256,
                    "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4,
                    "first_k_dense_replace": 3, "moe_layer_freq": 1, "routed_scaling_factor": 2.5,
                    "scoring_func": "sigmoid", "topk_method": "noaux_tc", "norm_topk_prob": True,
                    "kv_lora_rank": 512, "q_lora_rank": 1536, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128,
                    "v_head_dim": 128, "num_attention_heads": 128, "num_key_value_heads": 128,
                    "num_hidden_layers": 61, "num_nextn_predict_layers": 1, "vocab_size": 129280,
                    "max_position_embeddings": 163840, "rms_norm_eps": 1e-6, "rope_theta": 10000,
                    "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096,
                                     "beta_fast": 32, "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0},
                    "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False,
                    "quantization_config": {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                            "weight_block_size": [128, 128]}},
}
# Qwen/Qwen3-Next-80B-A3B-Instruct (hybrid linear attention: Gated DeltaNet layers, full attention every 4th;
# 512 experts; pdctl's qwen3-next-80b-a3b preset), trimmed to the architecture fields
MODELS["qwen3-next-80b-a3b"] = {
    "architectures": ["Qwen3NextForCausalLM"], "model_type": "qwen3_next", "hidden_size": 2048,
    "num_hidden_layers": 48, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
    "full_attention_interval": 4, "intermediate_size": 5120, "linear_conv_kernel_dim": 4, "linear_key_head_dim": 128,
    "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_value_head_dim": 128,
    "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512, "num_experts": 512,
    "num_experts_per_tok": 10, "decoder_sparse_step": 1, "mlp_only_layers": [], "norm_topk_prob": True,
    "partial_rotary_factor": 0.25, "rope_theta": 10000000, "rms_norm_eps": 1e-6, "vocab_size": 151936,
    "max_position_embeddings": 262144, "torch_dtype": "bfloat16", "hidden_act": "silu", "tie_word_embeddings": False}
# deepseek-ai/DeepSeek-V3.2-Exp: DeepSeek-V3's fields plus the DSA indexer (pdctl's deepseek-v3.2 preset)
MODELS["deepseek-v3.2"] = {**MODELS["deepseek-v3"], "architectures": ["DeepseekV32ForCausalLM"],
                           "model_type": "deepseek_v32", "index_head_dim": 128, "index_n_heads": 64,
                           "index_topk": 2048}
MOE = {"qwen3-30b-a3b", "deepseek-v3", "qwen3-next-80b-a3b", "deepseek-v3.2"}
HYBRID_LINEAR = {"qwen3-next-80b-a3b"}

# Flag sets of the resolution hooks PD recipes reach (DP attention, speculative decoding, HiCache / HiSparse,
# MoE / EP, attention backends), drawn on top of the per-role sets below. Each is the args: of a role (or both).
# Tree drafts (top-k > 1) and NGRAM: their page-size check reads the attention backend SGLang resolves
# (pdctl/sglang/attention.py; check-compat's speculative-backend).
SPECULATIVE: list[dict[str, Any]] = [
    {"speculative-algorithm": "EAGLE", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
     "speculative-num-draft-tokens": 4},
    {"speculative-algorithm": "EAGLE3", "speculative-num-steps": 2, "speculative-eagle-topk": 1,
     "speculative-num-draft-tokens": 3},
    {"speculative-algorithm": "NEXTN", "speculative-num-steps": 1, "speculative-eagle-topk": 1,
     "speculative-num-draft-tokens": 2},
    # tree drafts (top-k > 1) and NGRAM (its top-k defaults to its BFS breadth, 10)
    {"speculative-algorithm": "EAGLE", "speculative-num-steps": 3, "speculative-eagle-topk": 4,
     "speculative-num-draft-tokens": 8},
    {"speculative-algorithm": "NEXTN", "speculative-num-steps": 2, "speculative-eagle-topk": 2,
     "speculative-num-draft-tokens": 4},
    {"speculative-algorithm": "NGRAM"},
]
HICACHE: list[dict[str, Any]] = [
    {"enable-hierarchical-cache": True},
    {"enable-hierarchical-cache": True, "hicache-ratio": 2, "hicache-mem-layout": "page_first",
     "hicache-io-backend": "direct"},
    {"enable-hierarchical-cache": True, "hicache-mem-layout": "layer_first", "hicache-io-backend": "kernel",
     "hicache-storage-backend": "file"},
    {"enable-hisparse": True},
]
MOE_EXTRAS: list[dict[str, Any]] = [
    {"moe-a2a-backend": "deepep"},
    {"moe-a2a-backend": "deepep", "deepep-mode": "low_latency"},
    {"moe-a2a-backend": "deepep", "deepep-mode": "normal"},
    {"enable-eplb": True},
    {"moe-runner-backend": "flashinfer_trtllm"},
    {"moe-runner-backend": "triton"},
]
# Hybrid linear attention (mamba_hook / the mamba cache), drawn for Qwen3-Next.
MAMBA_EXTRAS: list[dict[str, Any]] = [
    {"mamba-ssm-dtype": "float32"},
    {"mamba-ssm-dtype": "bfloat16"},
    {"mamba-radix-cache-strategy": "no_buffer"},
    {"mamba-radix-cache-strategy": "extra_buffer"},
    {"max-mamba-cache-size": 256},
]  # not --mamba-backend flashinfer: whether flashinfer's mamba module is installed is the node's fact
ATTENTION_BACKENDS = ["fa3", "flashinfer", "triton", "fa4", "trtllm_mha", "flashmla", "cutlass_mla", "trtllm_mla"]

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
    widen(rng, model, server, prefill, decode, per_node)
    return {
        "name": f"gen-{model.replace('.', '-')}-{gpu}",
        "engine": {"kind": "sglang", "version": version},
        "model": {"path": str(models[model])},
        "nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": gpu, "gpus": per_node},
                  {"name": "d0", "host": "10.0.0.12", "gpu": gpu, "gpus": per_node}],
        "transfer": {"backend": rng.choice(["nixl", "mooncake"])},
        "server": server, "prefill": prefill, "decode": decode,
    }


def widen(rng: random.Random, model: str, server: dict[str, Any], prefill: dict[str, Any], decode: dict[str, Any],
          per_node: int) -> None:
    """The PD-relevant hooks beyond the base draw: DP attention, PP, speculative decoding, HiCache / HiSparse,
    MoE / EP, attention backends, the KV layout. Each with a modest probability, so most draws stay plain."""
    for role in (prefill, decode):
        if rng.random() < 0.2 and role["tp"] > 1:
            role["enable_dp_attention"] = True
            role["dp"] = rng.choice([role["tp"], 2])
        if rng.random() < 0.1 and role["tp"] * 2 <= per_node:
            role["pp"] = 2
        if model in MOE and rng.random() < 0.3:
            role["args"].update(rng.choice(MOE_EXTRAS))
            if rng.random() < 0.5:
                role["args"]["ep-size"] = role["tp"]
    if model in HYBRID_LINEAR and rng.random() < 0.5:
        rng.choice((prefill, decode))["args"].update(rng.choice(MAMBA_EXTRAS))
    if rng.random() < 0.3:  # speculative decoding: on both roles (a PD recipe), or decode only
        spec = rng.choice(SPECULATIVE)
        for role in (decode, prefill) if rng.random() < 0.7 else (decode,):
            role["args"].update(spec)
    if rng.random() < 0.2:
        rng.choice((prefill, decode))["args"].update(rng.choice(HICACHE))
    if rng.random() < 0.2:
        server["attention_backend"] = rng.choice(ATTENTION_BACKENDS)
    if rng.random() < 0.05:
        server["kv_layout"] = "hnd"


def gpu_facts(kind: str) -> dict[str, Any]:
    """What the oracle supplies in place of probing the device."""
    return {"capability": list(GPUS[kind]), "count": GPUS_PER_NODE[kind], "memory_mib": GPU_MEMORY_MIB[kind],
            "name": GPU_NAMES[kind]}


def generate(seed: int, n: int, models: dict[str, Path], version: str) -> list[dict[str, Any]]:
    """N drawn topologies, rendered: [{doc, deployment, spec, gpu, roles: {role: argv}, env: {role: SGLANG_*}}]."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        doc = draw(rng, models, version)
        topo = build_topology(doc, source="<generated>")
        deployment = render(topo)
        heads = [w for w in deployment.workers if w.node_rank == 0]
        out.append({"doc": doc, "deployment": deployment, "spec": resolve_model_spec(topo.model),
                    "gpu": gpu_facts(doc["nodes"][0]["gpu"]), "roles": {w.role: w.argv for w in heads},
                    "env": {w.role: {k: v for k, v in w.env.items() if k.startswith("SGLANG_")} for w in heads}})
    return out


def sglang_argv(argv: list[str]) -> list[str]:
    """The server's own arguments: what follows `-m sglang.launch_server` in a rendered command."""
    if "sglang.launch_server" in argv:
        return argv[argv.index("sglang.launch_server") + 1:]
    raise ValueError(f"not an SGLang server command: {argv[:4]}")
