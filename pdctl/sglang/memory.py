"""SGLang's KV-pool sizing, as its code computes it (0.5.23; pure functions, no SGLang import).

Read off the wheel: `arg_groups/memory_hook.py::handle_gpu_memory_settings` (the default
--mem-fraction-static and --chunked-prefill-size per GPU size), `mem_cache/kv_cache_configurator.py::
_profile_available_bytes` (the KV budget: free memory after loading the weights minus the non-static slack
`pre_model_load_memory * (1 - mem_fraction_static)`), `model_executor/pool_configurator.py` (bytes per token:
`DefaultPoolConfigurator._compute_cell_size`, `HybridSWAPoolConfigurator` with its full/SWA split by
--swa-full-tokens-ratio, page alignment, `max_total_tokens` as an upper bound). What pdctl cannot know
before launch is an estimate and documented as one: the memory CUDA and NCCL take before the model loads
(CONTEXT_GIB), and the GPU memory of a kind (GPU_MEMORY_MIB, what nvidia-smi reports on each).
"""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1 << 30
# nvidia-smi's "FB Memory Usage / Total" per GPU kind (H100 SXM and H200 HGX, B200 HGX, GB200/GB300 NVL72).
GPU_MEMORY_MIB: dict[str, int] = {"h100": 81559, "h200": 143771, "b200": 183359, "gb200": 189471, "gb300": 284208}
# CUDA context + NCCL/communicator buffers before the weights load (not part of pre_model_load_memory).
CONTEXT_GIB = 1.0
SWA_FULL_TOKENS_RATIO = 0.8  # --swa-full-tokens-ratio's fallback
MAX_PREFILL_TOKENS = 16384  # --max-prefill-tokens' default
MAMBA_FULL_MEMORY_RATIO = 0.9  # --mamba-full-memory-ratio's fallback (arg_groups/fields/schedule.py)
# bytes per cached element, by --kv-cache-dtype (auto: the model's dtype); None: pdctl cannot size it
KV_ELEMENT_BYTES: dict[str, float | None] = {"auto": None, "bf16": 2, "bfloat16": 2, "fp8_e4m3": 1, "fp8_e5m2": 1,
                                             "mxfp8": 1, "nvfp4": None, "fp4_mx_block16": None}


def default_chunked_prefill_size(gpu_mib: int) -> int:
    """--chunked-prefill-size when unset, by GPU memory (handle_gpu_memory_settings)."""
    if gpu_mib < 20 * 1024:
        return 2048
    if gpu_mib < 60 * 1024:
        return 4096
    if gpu_mib < 160 * 1024:
        return 8192
    return 16384


def default_decode_graph_max_bs(gpu_mib: int, tp: int) -> int:
    """The decode CUDA-graph max batch when unset, by GPU memory and TP (handle_gpu_memory_settings)."""
    if gpu_mib < 20 * 1024:
        return 8
    if gpu_mib < 35 * 1024:
        return 48 if tp < 4 else 160
    if gpu_mib < 60 * 1024:
        return 32 if tp < 4 else 160
    if gpu_mib < 160 * 1024:
        return 256 if tp < 4 else 512
    return 512


def prefill_graph_sizes(max_bs: int) -> int:
    """How many token counts SGLang captures prefill CUDA graphs for (generate_prefill_cuda_graph_batch_sizes)."""
    sizes = (list(range(4, 33, 4)) + list(range(48, 257, 16)) + list(range(288, 513, 32))
             + list(range(576, 1025, 64)) + list(range(1280, 4097, 256)) + list(range(4608, max_bs + 1, 512)))
    return sum(1 for s in sizes if s <= max_bs)


@dataclass(frozen=True)
class ServerShape:
    """What SGLang's memory heuristics read about one server (one rank of it)."""

    mode: str  # prefill | decode | null (a plain server)
    tp: int
    pp: int
    attn_dp: int
    mla: bool
    chunked_prefill_size: int | None
    max_running_requests: int | None


def default_mem_fraction_static(gpu_mib: int, s: ServerShape) -> float:
    """--mem-fraction-static when unset: (GPU memory - reserved) / GPU memory, reserved in MiB for activations,
    CUDA graphs and parallel slack (memory_hook.py, CUDA graphs on, post-capture KV sizing off: the default)."""
    chunked = s.chunked_prefill_size if s.chunked_prefill_size is not None else default_chunked_prefill_size(gpu_mib)
    max_bs = default_decode_graph_max_bs(gpu_mib, s.tp)
    if s.max_running_requests is not None:
        max_bs = min(max_bs, s.max_running_requests)
    if s.mode == "decode":
        activation = max(s.max_running_requests or max_bs, 2048)
    elif chunked > 0:
        activation = max(chunked, 2048)
    else:
        activation = max(MAX_PREFILL_TOKENS, 2048)
    reserved = 512 + activation * 1.5 + s.tp * s.pp / 8 * 1024 + _graph_reserve(s, max_bs, chunked)
    if gpu_mib > 60 * 1024:
        reserved = max(reserved, 10 * 1024)
    return round((gpu_mib - reserved) / gpu_mib, 3)


def _graph_reserve(s: ServerShape, max_bs: int, chunked: int) -> float:
    """reserve_for_graph_mb: decode graphs (more with DP attention), prefill graphs (8 MiB each; MLA 1.5 GiB)."""
    out = 0.0
    if s.mode != "prefill":
        out += max_bs * 2
        if s.attn_dp > 1:
            out += max_bs * s.attn_dp * 3 + (max_bs * s.attn_dp * 1.5 if max_bs > 300 else 0)
    if s.mode != "decode":
        out += 1.5 * 1024 if s.mla else prefill_graph_sizes(chunked) * 8
    return out


@dataclass(frozen=True)
class KvLayout:
    """Bytes one token takes in each pool of one rank."""

    full_bytes: float  # per token, all full-attention layers of the rank (MLA: the latent of every layer)
    swa_bytes: float = 0.0  # per token, all sliding-window layers (hybrid SWA pool), 0 without one
    swa_ratio: float = SWA_FULL_TOKENS_RATIO

    @property
    def cell_bytes(self) -> float:
        """Bytes of budget per token of max_total_num_tokens (the full pool's count)."""
        return self.full_bytes + self.swa_ratio * self.swa_bytes


def kv_layout(*, kv_heads: int, head_dim: int, attn_tp: int, full_layers: int, swa_layers: int,
              element_bytes: float, mxfp8: bool = False, mla_dim: int | None = None,
              swa_ratio: float = SWA_FULL_TOKENS_RATIO) -> KvLayout:
    """The pool geometry of one rank: MHA/GQA K and V of `max(1, kv_heads // attn_tp)` heads per layer
    (SGLang's get_num_kv_heads), MXFP8's one scale byte per 32 values, MLA's single latent per layer
    (kv_lora_rank + qk_rope_head_dim); SWA_LAYERS > 0 only with the hybrid SWA pool."""
    if mla_dim is not None:
        return KvLayout(mla_dim * element_bytes * (full_layers + swa_layers))
    heads = max(1, kv_heads // max(1, attn_tp))
    per_layer = heads * 2 * head_dim * element_bytes + (heads * 2 * head_dim // 32 if mxfp8 else 0)
    return KvLayout(per_layer * full_layers, per_layer * swa_layers, swa_ratio if swa_layers else 0.0)


def kv_share(rest_gib: float, hybrid_linear: bool, ratio: float | str | None = None) -> float:
    """The part of REST_GIB the KV pool gets. A hybrid linear-attention model first gives its mamba state pool
    rest x r / (1 + r), r = --mamba-full-memory-ratio (kv_cache_configurator.py, the ratio branch SGLang takes
    by default: radix cache on, no speculative decoding); the rest is the KV pool's."""
    if not hybrid_linear:
        return rest_gib
    r = float(ratio) if ratio is not None else MAMBA_FULL_MEMORY_RATIO
    return rest_gib - rest_gib * r / (1 + r)


@dataclass(frozen=True)
class PoolSizes:
    """SGLang's max_total_num_tokens (the full pool) and the SWA pool's tokens (None without one)."""

    max_total_num_tokens: int
    swa_tokens: int | None


def pool_sizes(budget_bytes: float, layout: KvLayout, page_size: int, max_total_tokens: int | None = None) -> PoolSizes:
    """Tokens the budget holds, page-aligned, capped by --max-total-tokens (the user limit only lowers it);
    the SWA pool gets swa_ratio of the full pool (HybridSWAPoolConfigurator._solve_pool_sizes)."""
    tokens = int(max(budget_bytes, 0) // layout.cell_bytes) if layout.cell_bytes > 0 else 0
    if max_total_tokens is not None:
        tokens = min(tokens, max_total_tokens)
    return fixed_pool_sizes(tokens, layout, page_size)


def fixed_pool_sizes(tokens: int, layout: KvLayout, page_size: int) -> PoolSizes:
    """The pools of a token count (calculate_pool_sizes_from_max_tokens): the full pool page-aligned, the SWA
    pool swa_ratio of it, page-aligned."""
    page = max(1, page_size)
    full = tokens // page * page
    swa = int(full * layout.swa_ratio) // page * page if layout.swa_bytes else None
    return PoolSizes(full, swa)
