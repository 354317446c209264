"""SGLang's own words for what it refuses, in one place (SGLang 0.5.23 source, quoted).

check-compat (pdctl/compat), the reference engine's handshake (pdctl/reference/roles/handshake.py) and the
transfer-plan builders (pdctl/plan) all say these sentences; writing them once keeps them from drifting apart
(and from SGLang's). Each function names the SGLang file that raises the message.
"""

from __future__ import annotations

import math

from pdctl.sglang.versions import release


# -- handshake: decode fetches prefill's server info (common/conn.py::try_ensure_parallel_info) -----------
def page_size_mismatch(prefill: object, decode: object) -> str:
    return (f"Page size mismatch: prefill server has page_size={prefill}, but decode server has "
            f"page_size={decode}. Both servers must use the same --page-size value.")


# the first releases whose common/conn.py checks them at decode's first request (read off the wheels: 0.5.7 has neither,
# 0.5.8.post1 and 0.5.9 the page check only)
PAGE_SIZE_CHECK_SINCE, KV_DTYPE_CHECK_SINCE = "0.5.8", "0.5.10"


def kv_dtype_mismatch(prefill: object, decode: object) -> str:
    return (f"KV cache dtype mismatch: prefill server has kv_cache_dtype={prefill}, but decode server has "
            f"kv_cache_dtype={decode}. Both servers must use the same --kv-cache-dtype value.")


def mxfp8_hetero_tp(prefill_attn_tp: int, decode_attn_tp: int, state_types: list[str] | None = None) -> str:
    states = f", state types {state_types}" if state_types is not None else ""
    return ("PD Disaggregation does NOT support different attention TP sizes with MXFP8 KV cache: "
            f"prefill attn_tp_size={prefill_attn_tp}, decode attn_tp_size={decode_attn_tp}{states}.")


def pp_mismatch(decode_pp: int, prefill_pp: int) -> str:
    """common/conn.py::_resolve_rank_mapping (an assert: AssertionError with this text)."""
    return f"Decode pp size ({decode_pp}) should be equal to prefill pp size ({prefill_pp}) or 1"


# -- first transfer: the head-slice block builder (common/conn.py::_get_mha_head_slice_blocks) ------------
SWA_HETERO_TP_PP = ("PD Disaggregation does NOT support PD different TP sizes for non-MLA SWA hybrid models "
                    "with pipeline parallelism yet.")


# nixl/conn.py::_prepare_payload_xfer (0.5.23: conn.py:1590-1594), raised in the prefill's bootstrap thread when
# the decode's KV is host memory (DRAM) and the TP sizes differ; the request then waits out the bootstrap timeout
NIXL_HETERO_TP_HOST = "NIXL heterogeneous-TP direct-to-host KV transfer is not implemented safely yet"


def head_slice_layout(layout: str) -> str:
    return f"Head-sliced PD transfer needs the NHD KV cache layout, got {layout}"


def head_slice_buffers(prefill_entries: int, decode_entries: int) -> str:
    return ("Head-sliced PD transfer needs matching per-layer K/V buffers: "
            f"prefill has {prefill_entries} entries, decode has {decode_entries}")


def head_slice_pages(prefill_pages: int, decode_pages: int) -> str:
    return f"Head-sliced PD transfer page count mismatch: prefill={prefill_pages}, decode={decode_pages}"


def head_slice_item_lens(src_len: int, dst_len: int, src_heads: int, dst_heads: int, total: int,
                         page_size: int) -> str:
    return (f"KV item lengths (prefill={src_len}, decode={dst_len}) do not split into {src_heads} and "
            f"{dst_heads} heads of {total} total with page_size={page_size}")


# The refusal's wording by release (mooncake/nixl conn.py::maybe_send_extra, read off the wheels): 0.5.4 added
# the check, 0.5.9 named the state (SWA, ...) in it; 0.5.22 replaced it with the head-slice transfer.
HYBRID_HETERO_TP_CHECK_SINCE = "0.5.4"
HYBRID_HETERO_TP_STATE_SINCE = "0.5.9"


def hybrid_state_hetero_tp(state: str = "SWA", version: tuple[int, ...] | None = None) -> str | None:
    """Releases before head-sliced SWA (SGLang <= 0.5.21), as release VERSION (parsed) words it (None: the
    newest wording); None for a release older than the check, which has no such message."""
    if version is not None and version < release(HYBRID_HETERO_TP_CHECK_SINCE):
        return None
    if version is not None and version < release(HYBRID_HETERO_TP_STATE_SINCE):
        return "PD Disaggregation does NOT support PD different TP sizes for non-MLA hybrid models yet."
    return f"PD Disaggregation does NOT support PD different TP sizes for non-MLA {state} hybrid models yet."


# NIXL 0.5.9 and 0.5.10 (nixl/conn.py::maybe_send_extra) refuse a hybrid mamba model's state with unequal TP
NIXL_MAMBA_HETERO_TP = "PD Disaggregation does NOT support PD different TP sizes for hybrid mamba models yet."


# NIXL from 0.5.23 (nixl/conn.py::_resolve_ucx_device_list) refuses port-suffixed HCA names at agent creation
NIXL_IB_DEVICE_PORT = ("NIXL UCX --disaggregation-ib-device requires HCA names without port suffixes (e.g. "
                       "mlx5_0); NIXL appends port 1.")


# -- argument parsing: ServerArgs resolution hooks (arg_groups/kv_cache_hook.py) ---------------------------
MXFP8_NEEDS_BLACKWELL = ("--kv-cache-dtype mxfp8 requires an SM100+ (Blackwell) GPU for the block-scaled "
                         "operands used by the FA4 MXFP8 attention path.")


def unified_memory_backends(backend: str, supported: tuple[str, ...] = ("mooncake",)) -> str:
    return ("--enable-unified-memory with PD disaggregation supports only these transfer backends: "
            f"{', '.join(sorted(supported))}; got {backend!r}.")


UNIFIED_MEMORY_PP = ("--enable-unified-memory with PD disaggregation does not support pipeline parallelism "
                     "(whole-envelope transfer has no per-layer entries to subset).")


# -- first transfer: the whole-envelope (unified memory) sender (mooncake/conn.py) --------------------------
def unified_memory_tp(prefill_attn_tp: int, decode_attn_tp: int) -> str:
    return ("--enable-unified-memory does not support different prefill / decode attention TP sizes "
            f"(prefill={prefill_attn_tp}, decode={decode_attn_tp}): the whole-envelope state cannot be "
            "TP-resliced.")


def unified_memory_layout(prefill_regions: int, decode_regions: int) -> str:
    return (f"PD KV layout mismatch on the whole-envelope path: prefill has {prefill_regions} KV region(s), "
            f"decode has {decode_regions}. With --enable-unified-memory both sides must enable it and use the "
            "same page size and model spec.")


# -- model load: prefill / decode init with the staging buffer (disaggregation/prefill.py, decode.py) -------
STAGING_MLA = ("SGLANG_DISAGG_STAGING_BUFFER is designed for non-MLA models (e.g. GQA, MHA). MLA models should "
               "not set this flag.")


def staging_chunk(page_size: int, chunked_prefill_size: object) -> str:
    return ("SGLANG_DISAGG_STAGING_BUFFER requires a positive chunked_prefill_size that is a multiple of "
            f"page_size ({page_size}); got {chunked_prefill_size}.")


STAGING_PP = "SGLANG_DISAGG_STAGING_BUFFER with pp_size > 1 is only supported by Mooncake."


# -- model load: attention backends (layers/attention/attention_registry.py, arg_groups/attention_hook.py) --
def fa3_gpu(kind: str) -> str:
    return (f"FlashAttention v3 Backend requires SM>=80 and SM<=90 (got {kind}). "
            "Please use `--attention-backend flashinfer`.")


TRTLLM_MHA_MLA = "trtllm_mha backend can only be used with non-MLA models."


def trtllm_mha_gpu(kind: str) -> str:
    return f"TRTLLM MHA backend requires Hopper (SM90), Blackwell (SM100), or SM120 GPUs (got {kind})."


# -- model load: building the KV transfer buffers (mem_cache/memory_pool.py::get_contiguous_buf_infos) -----
HND_DISAGG = ("PD-disaggregation KV transfer assumes NHD slot-row layout; HND KV cache (SGLANG_USE_HND_KVCACHE) is "
              "not supported with disagg yet.")


# -- first transfer: state lists that do not pair (nixl/conn.py, mooncake/conn.py send paths) ---------------
def state_index_mismatch(component: int, prefill: int, decode: int) -> str:
    return f"State index length mismatch at component {component}: prefill={prefill}, dst={decode}"


# -- pdctl's words where SGLang has none (it accepts the shape, then fails late or silently) ---------------
def attn_tp_ratio(prefill_attn_tp: int, decode_attn_tp: int) -> str:
    return (f"attention TP sizes prefill={prefill_attn_tp}, decode={decode_attn_tp}: neither divides the other. "
            "SGLang's handshake accepts them, but its rank mapping (_resolve_rank_mapping: target_tp_rank = "
            "rank // (decode_tp // prefill_tp)) pairs decode ranks with prefill ranks that do not exist or "
            "hold other heads")


def nixl_prep_groups(prefill_attn_tp: int, decode_attn_tp: int, kv_heads: int, groups: int) -> str:
    return (f"NIXL with prefill attention TP {prefill_attn_tp} -> decode {decode_attn_tp} and {kv_heads} KV heads: "
            f"SGLang's NIXL manager interleaves num_groups = decode_tp // prefill_tp // max(1, decode_tp // "
            f"kv_heads) = {groups} head groups per token, which do not tile a prefill page, and fails the "
            "assertion `page_size * num_groups * bytes_per_token_to_send == src_kv_item_len` in "
            "_init_hetero_tp_prep_handle (nixl/conn.py) when a decode rank registers: a bare AssertionError, "
            "every request then fails")


def transfer_backend_mismatch(prefill: str, decode: str) -> str:
    return (f"Transfer backend mismatch: prefill uses {prefill}, decode uses {decode}. "
            "Both servers must use the same --disaggregation-transfer-backend.")


# -- field incidents: SGLang's (and its neighbours') own words where it says something --------------------
# model load: the KV budget (mem_cache/kv_cache_configurator.py::_profile_available_bytes, 0.5.14+) and the
# pool (model_executor/pool_configurator.py::MemoryPoolConfig, every release)
def kv_no_room(mem_fraction_static: float, minimum: float) -> str:
    suggested = math.ceil(minimum * 1000) / 1000
    return (f"Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={mem_fraction_static}. "
            f"Raise --mem-fraction-static above {suggested:.3f} (minimum viable = 1 - available/pre = {minimum:.4f}). "
            "If using speculative decoding, draft weights are now counted.")


NOT_ENOUGH_MEMORY = "Not enough memory. Please try to increase --mem-fraction-static."


def not_enough_memory(mem_fraction_static: float | None) -> str:
    return NOT_ENOUGH_MEMORY + (f" Current value: mem_fraction_static={mem_fraction_static}"
                                if mem_fraction_static is not None else "")


def swa_pool_too_small(swa_tokens: int, window: int, page_size: int) -> str:
    """pool_configurator.py::validate_swa_pool_size (the SWA pool of a hybrid model, model load)."""
    return (f"SWA pool ({swa_tokens} tokens) cannot hold even one request: the prefill admission floor is "
            f"sliding_window_size ({window}) + page_size ({page_size}). Increase --swa-full-tokens-ratio or the "
            "total KV budget.")


def kv_below_context(capacity: int, context_length: int) -> str:
    """managers/tp_worker.py::get_worker_info's startup warning (first in 0.5.23)."""
    return (f"KV pool holds {capacity} tokens, fewer than --context-length {context_length}. One full-length "
            "request cannot fit, so long requests will be refused or truncated at serving time. Lower "
            "--context-length, raise --mem-fraction-static, or free memory taken before the pool is sized.")


# first transfer: prefill's DP-rank check (disaggregation/common/conn.py::CommonKVSender, 0.5.11+)
def follow_room_conflict(dispatched: int, room: int, implied: int) -> str:
    return (f"follow_bootstrap_room conflict: dispatched to dp_rank {dispatched} but bootstrap_room {room} implies "
            f"dp_rank {implied}. Set SGLANG_DISAGGREGATION_FORCE_QUERY_PREFILL_DP_RANK=1 to allow mixed routing.")


# argument parsing: the attention hook rewrites the page size for trtllm_mha (arg_groups/overrides.py, 0.5.17+)
def trtllm_mha_page(page_size: int, allowed: tuple[int, ...] = (16, 32, 64, 128)) -> str:
    sizes = ", ".join(str(p) for p in allowed[:-1]) + f" or {allowed[-1]}"
    return (f"TensorRT-LLM MHA only supports page_size of {sizes}, changing page_size from {page_size} to 64.")


# argument parsing: the DSA model override sets the page size (arg_groups/model_overrides/deepseek_v2.py from 0.5.19,
# server_args.py before; "NSA" in the wording until 0.5.7, "DSA" from 0.5.8; 64 x index_kpool from 0.5.22)
DSA_PAGE_WORD_SINCE = "0.5.8"


def dsa_page_size(page_size: int, version: tuple[int, ...] | None = None) -> str:
    word = "NSA" if version is not None and version < release(DSA_PAGE_WORD_SINCE) else "DSA"
    return f"Setting page size to {page_size} for DeepSeek {word}."


# environment: SGLang's EnvInt / EnvFloat on a value they cannot parse (environ.py: warn, use the default)
def env_invalid(name: str, value: str, kind: str, default: object) -> str:
    return f'Invalid value for {name}: "{value}" is not a valid {kind} value, using default "{default}"'


# Mooncake's transfer engine (rdma_context.cpp) when GPU memory cannot be registered without nvidia-peermem
MOONCAKE_NO_PEERMEM = "DMA BUF supported required for GPU RDMA without nvidia-peermem"


# -- pdctl's words for field incidents (SGLang runs these and fails late or silently) ---------------------
def dp_attention_double_reduce(model: str, role: str, tp: int, attn_dp: int, ep: int, version: str, fixed: str) -> str:
    return (f"{role}: {model} with DP attention (tp {tp}, attention DP {attn_dp}, ep {ep}, MoE a2a none) on "
            f"{version}: the MoE output is reduced twice (a TP all-reduce, then DP attention's reduce_scatterv), "
            f"scaling it by ~TP: garbage answers, no error (GSM8K 0/128 vs 124/128 without DP attention; "
            f"fixed in SGLang {fixed})")


def dp_attention_replicated_gather(model: str, role: str, attn_tp: int, version: str, fixed: str) -> str:
    return (f"{role}: {model} with DP attention at attention TP {attn_tp} (MoE a2a none) on {version}: "
            "dp_gather_partial sums the already-reduced hidden states of every attention-TP rank, multiplying "
            f"them by {attn_tp} at each MoE layer: garbage answers, no error (fixed in SGLang {fixed})")


# runtime: the scheduler's idle invariant check (managers/scheduler_components/invariant_checker.py::_report_leak,
# scheduler_runtime_checker_mixin.py before 0.5.14): f"{pool_name} memory leak detected! {token_msg}"
MEMORY_LEAK = "memory leak detected!"


def decode_radix_offload(role: str, version: str, fixed: str) -> str:
    return (f"{role}: decode radix cache with decode KV offload on {version}: the offload manager releases a "
            "finished request's whole KV row and unlocks the radix prefix by hand, double-freeing the slots the "
            f"tree owns; after the first finished request the scheduler raises '... {MEMORY_LEAK} ... "
            f"protected=-N' and decode exits (fixed in SGLang {fixed})")


# runtime: the decode HiCache restore (disaggregation/decode_hicache_mixin.py::_try_hicache_queue_load_back, a
# warning; the request then fails with decode.py's failure_reason "HiCache restore failed")
HICACHE_LOAD_BACK_FAILED = "HiCache load_back failed for rid="


def decode_hicache_l3(role: str, backend: object, version: str, fixed: str) -> str:
    return (f"{role}: decode radix cache with HiCache and the L3 storage backend {backend} on {version}: when an "
            "L3 prefetch is declined (below the prefetch threshold, rate limited, host memory short) decode still "
            "promises prefill the L3 prefix, the restore finds nothing ('" + HICACHE_LOAD_BACK_FAILED + "...', "
            "'HiCache restore failed') and the request fails; after a decode restart every prefix hit comes from "
            f"L3 (fixed in SGLang {fixed})")


# runtime: KVCache.get_cpu_copy (mem_cache/memory_pool.py) of a pool without a CPU copy: `raise NotImplementedError()`
def dsv4_decode_retraction(role: str, version: str, fixed: str) -> str:
    return (f"{role}: DeepSeek-V4 on a PD decode on {version}: the first retraction when decode's KV pool is full "
            "copies the request's KV to the CPU, and DeepSeekV4TokenToKVPool has no get_cpu_copy: "
            f"NotImplementedError, the decode scheduler dies (fixed in SGLang {fixed}: prefill recomputes a "
            "retracted request)")


def spec_decode_only_dp_attention(model: str, algorithm: object, attn_dp: int, version: str) -> str:
    return (f"decode: speculative decoding ({algorithm}) on decode only with DP attention ({attn_dp} ranks) and "
            f"{model}'s MTP top-k sharing (index_share_for_mtp_iteration) on {version}: a rank with a request has no "
            "top-k seeded by prefill and runs its draft without the CUDA graph, idle DP ranks run it with the graph; "
            "their collectives differ and decode deadlocks at warm-up")


# -- decode KV offload (arg_groups/kv_cache_hook.py, start-up resolution) ----------------------------------
OFFLOAD_KVCACHE_NEEDS_STORAGE = ("The argument disaggregation-decode-enable-offload-kvcache is only supported when "
                                 "hicache-storage-backend is provided.")
# arg_groups/kv_cache_hook.py (server_args.py before 0.5.19), every release 0.5.16-0.5.23
HICACHE_NEEDS_RADIX = ("The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive "
                       "and cannot be used at the same time. Please use only one of them.")
# arg_groups/parallel_hook.py: `assert ep_size > 1` (a bare assert: SGLang's AssertionError has no words)
EPLB_NEEDS_EP = ("--enable-eplb needs an expert-parallel size above 1: SGLang asserts ep_size > 1 at start-up "
                 "(AssertionError with no message).")


def hisparse_model(minimax: bool) -> str:
    """hisparse_hook.py's assert: MiniMax M3 joined in 0.5.21 (the words end with a space)."""
    which = "(e.g., DeepSeek V3.2, GLM-5), DeepSeek V4, and MiniMax M3" if minimax else \
        "(e.g., DeepSeek V3.2, GLM-5) and DeepSeek V4"
    return f"--enable-hisparse is only supported for DSA (DeepSeek Sparse Attention) models {which} now. "

HISPARSE_DECODE_RADIX = "--disaggregation-decode-enable-radix-cache is incompatible with --enable-hisparse"
# PP with speculative decoding: server_args.py / validation_hook.py before 0.5.21, validation_hook.py since
PP_NO_SPECULATIVE = "Pipeline parallelism is not compatible with overlap schedule, speculative decoding"
PP_EAGLE_ONLY = "Pipeline parallelism currently only supports EAGLE (non-multi-layer) speculative decoding"


def spec_decode_radix(algorithm: str) -> str:
    """pd_disaggregation_hook.py (0.5.16-0.5.22), speculative_hook.py (0.5.23)."""
    return ("--disaggregation-decode-enable-radix-cache is incompatible with speculative decoding "
            f"(--speculative-algorithm {algorithm})")


OFFLOAD_KVCACHE_HOST_POOL = ("The arguments disaggregation-decode-enable-offload-kvcache and "
                             "disaggregation-decode-retraction-backup=host_pool are mutually exclusive: "
                             "both build a decode host pool.")


# The attention backend SGLang resolves, read at start-up (arg_groups/overrides.py, speculative_hook.py: every
# release 0.5.16-0.5.23; fp4_e2m1 left trtllm_mla's KV dtypes in 0.5.21).
TRTLLM_MLA_NEEDS_BLACKWELL = ("TRTLLM MLA backend is only supported on Blackwell GPUs (SM100/SM12x). "
                              "Please use a different backend.")


def trtllm_mla_kv_dtype(fp4: bool) -> str:
    """overrides.py::_mla_kv_cache_dtype_checks: FP4 says whether the release still lists fp4_e2m1."""
    dtypes = "fp8_e4m3, fp4_e2m1, bf16, or auto" if fp4 else "fp8_e4m3, bf16, or auto"
    return f"TensorRT-LLM MLA backend only supports kv-cache-dtype of {dtypes}."


# server_args.py 0.5.16-0.5.18 (SM90 joined in 0.5.19's attention_hook.py)
TRTLLM_MHA_PREFILL_BLACKWELL = ("TRTLLM MHA backend for prefill is only supported on Blackwell GPUs (SM100). "
                                "Please use a different prefill backend.")
TRTLLM_MHA_TOPK_ONE = "trtllm_mha backend only supports topk = 1 for speculative decoding."


def spec_tree_page_backend(backends: tuple[str, ...], backend: str) -> str:
    """speculative_hook.py::_handle_eagle_family: a tree draft (top-k > 1) on pages needs a cascade backend."""
    return (f"speculative_eagle_topk > 1 with page_size > 1 is only supported on {backends}; got "
            f"attention_backend={backend!r}. Use page_size == 1 or one of those backends.")


def ngram_page_backend(topk: int, page_size: int) -> str:
    """speculative_hook.py::_handle_ngram: NGRAM's top-k is its BFS breadth."""
    return (f"speculative_eagle_topk({topk}) > 1 with page_size({page_size}) > 1 is unstable and produces "
            "incorrect results for paged attention backends. This combination is only supported for the "
            "'flashinfer' backend.")


NGRAM_DP_ATTENTION = "Currently ngram speculative decoding does not support dp attention."
DSA_KV_DTYPE = "DeepSeek DSA only supports bf16/bfloat16 or fp8_e4m3 kv_cache_dtype"  # overrides.py, 0.5.16-0.5.23
# mamba_hook.py::validate_mamba_no_buffer (server_args.py before 0.5.19)
MAMBA_NO_BUFFER_PAGE = "no_buffer only supports page_size=1."
MAMBA_NO_BUFFER_OVERLAP = "no_buffer do not support overlap schedule. Try to set disable_overlap_schedule=True."
MAMBA_NO_BUFFER_TRTLLM_MHA = "no_buffer do not support trtllm_mha attention backend."
# validation_hook.py 0.5.21+: PP with (EAGLE) speculative decoding outside a PD prefill
PP_MTP_PREFILL_ONLY = ("PP + speculative decoding (MTP) is only supported on prefill nodes "
                       "(disaggregation-mode=prefill)")
PP_SPEC_ENV_PD = "SGLANG_ENABLE_PP_SPEC is not compatible with --disaggregation-mode"
