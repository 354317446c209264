"""SGLang 0.5.23's metric names and histogram buckets (python/sglang/srt/observability/metrics_collector.py),
plus the few that are pdctl's own (prefix `pdctl:`), and sglang-router's (prefix `smg_`).

One source for the reference engine's exposition (pdctl.metrics.engine) and for the readers
(pdctl.metrics.figures): a dashboard or `pdctl status --watch` reads a reference engine and a real SGLang
server alike. SGLang's labels: scheduler metrics carry model_name, engine_type (prefill | decode | unified),
tp_rank, pp_rank, moe_ep_rank; tokenizer metrics model_name, engine_type and, on some, is_streaming.
"""

from __future__ import annotations

# ---- scheduler side (gauges, sampled) ----------------------------------------------------------------
RUNNING = "sglang:num_running_reqs"
QUEUED = "sglang:num_queue_reqs"
TOKEN_USAGE = "sglang:token_usage"  # max(full, swa) pool usage, 0..1
FULL_TOKEN_USAGE = "sglang:full_token_usage"
SWA_TOKEN_USAGE = "sglang:swa_token_usage"
KV_USED_TOKENS = "sglang:kv_used_tokens"
KV_AVAILABLE_TOKENS = "sglang:kv_available_tokens"
KV_EVICTABLE_TOKENS = "sglang:kv_evictable_tokens"
CACHE_HIT_RATE = "sglang:cache_hit_rate"  # prefix-cache hit share of the last prefill batch
NEW_TOKEN_RATIO = "sglang:new_token_ratio"
PREFILL_INFLIGHT = "sglang:num_prefill_inflight_queue_reqs"  # prefill: KV being sent
DECODE_TRANSFER = "sglang:num_decode_transfer_queue_reqs"  # decode: KV being received
MAX_TOTAL_TOKENS = "sglang:max_total_num_tokens"
PAGE_SIZE = "sglang:page_size"
CONTEXT_LEN = "sglang:context_len"
RETRACTED = "sglang:num_retracted_requests_total"

# ---- PD transfer (scheduler side) --------------------------------------------------------------------
BOOTSTRAP_FAILED = "sglang:num_bootstrap_failed_reqs_total"
TRANSFER_FAILED = "sglang:num_transfer_failed_reqs_total"
KV_TRANSFER_LATENCY_MS = "sglang:kv_transfer_latency_ms"  # prefill: transfer queue entry -> done
KV_TRANSFER_TOTAL_MB = "sglang:kv_transfer_total_mb"  # prefill: MiB per request (bytes / 2**20)
KV_TRANSFER_SPEED = "sglang:kv_transfer_speed_gb_s"
# pdctl's own (SGLang has no plain counters of transfers or bytes, and counts none on decode):
KV_TRANSFERS = "pdctl:kv_transfers_total"  # label outcome = ok | failed; both PD roles
KV_TRANSFER_BYTES = "pdctl:kv_transfer_bytes_total"  # bytes written by prefill (descriptor lengths)

# ---- tokenizer side (per finished request) -----------------------------------------------------------
REQUESTS = "sglang:num_requests_total"
PROMPT_TOKENS = "sglang:prompt_tokens_total"
GENERATION_TOKENS = "sglang:generation_tokens_total"
CACHED_TOKENS = "sglang:cached_tokens_total"
ABORTED = "sglang:num_aborted_requests_total"
TTFT = "sglang:time_to_first_token_seconds"
ITL = "sglang:inter_token_latency_seconds"
E2E = "sglang:e2e_request_latency_seconds"

TTFT_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
E2E_BUCKETS = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
ITL_BUCKETS = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
               0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
KV_LATENCY_MS_BUCKETS = (1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000)
KV_TOTAL_MB_BUCKETS = (1, 5, 10, 50, 100, 500, 1000, 5000, 10000)
KV_SPEED_BUCKETS = (0.1, 0.5, 1, 5, 10, 25, 50, 100, 200, 400)

# ---- sglang-router 0.3.x (its Rust exporter on --prometheus-port) ------------------------------------
ROUTER_REQUESTS_ROUTED = "smg_router_requests_total"  # generation requests routed (not health checks)
ROUTER_DURATION = "smg_router_request_duration_seconds"  # per routed request, end to end
ROUTER_ERRORS = "smg_router_request_errors_total"  # routed requests a worker failed (label error_type)
ROUTER_ACTIVE = "smg_worker_requests_active"  # in flight to each worker
ROUTER_RATE_LIMIT = "smg_http_rate_limit_total"  # label result: allowed | rejected (its --max-concurrent-requests)
ROUTER_TTFT = "smg_router_ttft_seconds"  # gRPC mode only (HTTP PD mode records none)
ROUTER_TOKENS = "smg_router_tokens_total"  # gRPC mode only


def engine_type(role: str) -> str:
    """SGLang's engine_type label for a server role (DisaggregationMode.to_engine_type)."""
    return role if role in ("prefill", "decode") else "unified"

# ---- NVIDIA dcgm-exporter (its default counters, etc/default-counters.csv, and the profiling fields of
# etc/dcp-metrics-included.csv) ------------------------------------------------------------------------
DCGM_GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"  # %, not reported for a MIG'd GPU
DCGM_FB_USED = "DCGM_FI_DEV_FB_USED"  # MiB (per MIG instance under MIG)
DCGM_FB_FREE = "DCGM_FI_DEV_FB_FREE"  # MiB
DCGM_XID = "DCGM_FI_DEV_XID_ERRORS"  # the value of the last XID error (0: none)
DCGM_NVLINK_TOTAL = "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL"  # counter over all lanes
DCGM_PCIE_TX_KB = "DCGM_FI_DEV_PCIE_TX_THROUGHPUT"  # counter, KB (default counters)
DCGM_PCIE_RX_KB = "DCGM_FI_DEV_PCIE_RX_THROUGHPUT"
DCGM_GR_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"  # ratio 0..1 of time the graphics/compute engine is busy
DCGM_TENSOR_ACTIVE = "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE"  # ratio 0..1 of cycles the tensor pipe is busy
DCGM_PCIE_TX_BYTES = "DCGM_FI_PROF_PCIE_TX_BYTES"  # bytes/s
DCGM_PCIE_RX_BYTES = "DCGM_FI_PROF_PCIE_RX_BYTES"
DCGM_NVLINK_TX_BYTES = "DCGM_FI_PROF_NVLINK_TX_BYTES"  # bytes/s
DCGM_NVLINK_RX_BYTES = "DCGM_FI_PROF_NVLINK_RX_BYTES"
DCGM_CLOCK_REASONS = ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS")  # new, old name
DCGM_PORT = 9400  # dcgm-exporter's default listen port
