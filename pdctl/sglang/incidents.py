"""Field incidents: what SGLang PD users lost GPU-hours to, with the releases each applies to.

SGLang has no guard for any of these (that is why they are incidents): a config runs, then answers wrongly,
hangs or fails late. Each entry names the public report, the fix, and the releases, read off the released
wheels (`pip download --no-deps sglang==X`, grep the fixing code; see the comments). `first` is the first
affected release (None: every release pdctl knows), `fixed` the first release with the fix (None: no
released fix yet). check-compat's incident rules (pdctl/compat/capacity.py, dp.py, generations.py, timeouts.py) gate on
these; the differential suite against SGLang's own code treats them as deliberate extras (its oracle has no
guard to compare them with).
"""

from __future__ import annotations

from dataclasses import dataclass

from pdctl.sglang.versions import Version, parse_version, release

GH = "https://github.com/sgl-project/sglang"


@dataclass(frozen=True)
class Incident:
    """One public report and the releases it applies to."""

    id: str
    report: str
    fix: str | None
    first: str | None
    fixed: str | None

    def affects(self, version: Version | str) -> bool:
        """True when VERSION is at or after `first` and before `fixed`."""
        v = parse_version(version) if isinstance(version, str) else version
        if v is None:
            return True
        return (self.first is None or v >= release(self.first)) and (self.fixed is None or v < release(self.fixed))

    @property
    def releases(self) -> str:
        """'0.5.11 <= SGLang < 0.5.20', 'every release', ... for docs and messages."""
        if self.first is None and self.fixed is None:
            return "every release (no released fix)"
        if self.fixed is None:
            return f"SGLang >= {self.first} (no released fix)"
        return f"SGLang {self.first} ... before {self.fixed}" if self.first else f"SGLang before {self.fixed}"


# gpt-oss + DP attention + EP == attention DP (+ TP == attention DP from 0.5.19), MoE a2a none: PR #22642
# (first in 0.5.11: `should_use_dp_reduce_scatterv` in layers/moe/utils.py, used by communicator.py's
# _scatter_hidden_states) made the post-MoE combine a reduce_scatterv; gpt_oss.py's forward_normal kept its
# own TP all-reduce (`if self.tp_size > 1 and not get_forward().fuse_mlp_allreduce`), so the MoE output is
# summed twice (x TP). Fixed by PR #37199: gpt_oss.py checks should_skip_post_experts_all_reduce from 0.5.20.
GPT_OSS_DP_ATTENTION = Incident("gpt-oss-dp-attention", f"{GH}/issues/37187", f"{GH}/pull/37199", "0.5.11", "0.5.20")
# DeepSeek-V4 DP attention with attention TP > 1 and MoE a2a none: deepseek_v4.py gathered the (already
# attention-TP-reduced, replicated) hidden states with dp_gather_partial, summing attn_tp copies. Shipped
# with the model (deepseek_v4.py first in 0.5.12); PR #31700 switched to dp_gather_replicate, first in 0.5.18.
DEEPSEEK_V4_DP_ATTENTION = Incident("deepseek-v4-dp-attention", f"{GH}/issues/31699", f"{GH}/pull/31700",
                                    "0.5.12", "0.5.18")
# The same class checked for the other models pdctl knows: deepseek_v2.py (DeepSeek-V3) guards its
# post-experts all-reduce with should_skip_post_experts_all_reduce in 0.5.11, the first release with
# reduce_scatterv (PR #23732 merged before it shipped): no affected release. Llama is dense (no MoE combine).

# PD: a prompt the prefill refuses (longer than its max_req_input_len, which the KV pool bounds) is still
# handed to decode as a one-token transfer; decode then answers from KV it never received. Open fixes
# (PRs #30551, #35421, #38704) are in no release.
ABORTED_PREFILL_GARBAGE = Incident("aborted-prefill-garbage", f"{GH}/issues/30233", None, None, None)
# Prefill on one GPU generation, decode on another: accuracy falls as requests accumulate (GPQA 95% -> ~50%
# after ~100 requests, RTX 5090 prefill / H20 decode). Open, no root cause.
MIXED_GPU_DRIFT = Incident("mixed-gpu-drift", f"{GH}/issues/23020", None, None, None)
# Mooncake receivers stuck in KVPoll.Transferring are never timed out (the waiting timeout only applies to
# WaitingForInput): decode's transfer queue freezes, admission slots leak. PR #31800 is open.
STUCK_TRANSFERRING = Incident("stuck-transferring", f"{GH}/pull/31800", f"{GH}/pull/31800", None, None)
# Plain DP (--dp-size > 1 without DP attention) on prefill: CommonKVSender compares attn_dp_rank (0 in every
# DP replica) with bootstrap_room % dp_size and fails every request of the other DP ranks ("follow_bootstrap_
# room conflict"); the check arrived in 0.5.11 (after PR #22901). PR #29730 (system_dp_rank) is open.
PLAIN_DP_PREFILL = Incident("plain-dp-prefill", f"{GH}/issues/29725", f"{GH}/pull/29730", "0.5.11", None)
# Decode learns the prefill DP rank of a request from the bootstrap server (/register_dp_rank, PR #19168,
# first in 0.5.10); before, it assumed bootstrap_room % dp_size, so a prefill dispatching by another
# --load-balance-method sends KV the decode never asks for.
DP_RANK_QUERY_SINCE = "0.5.10"
# sglang-router with --dp-aware in PD mode (0.3.2, what pdctl renders and tests): workers are registered as
# `http://host:port@rank` and requests are sent to that string, which HTTP parses as user info and host
# `rank`: no request reaches a worker (tests/compat/test_router_dp_aware.py runs the real router). Dynamo's
# fix of the same contract: ai-dynamo/dynamo#9080 (bootstrap_room aligned with the chosen prefill DP rank).
ROUTER_DP_AWARE_PD = Incident("router-dp-aware-pd", "https://github.com/ai-dynamo/dynamo/pull/9080", None, None, None)
ROUTER_TESTED = "0.3.2"
# Weights that leave no KV pool: DeepSeek-R1 on 8 GPUs, "max_total_tokens=131072 is larger than the profiled
# value -561981" and the server dies at startup (every release fails at model load, after the launch).
KV_NO_ROOM = Incident("kv-no-room", f"{GH}/issues/7691", None, None, None)
# Its messages: "Loaded weights leave no GPU memory for the KV cache" from 0.5.14
# (kv_cache_configurator / model_runner); "Not enough memory. Please try to increase --mem-fraction-static."
# (MemoryPoolConfig) in every release. The startup warning "KV pool holds N tokens, fewer than
# --context-length" (tp_worker.get_worker_info) first ships in 0.5.23.
KV_NO_ROOM_MESSAGE_SINCE = "0.5.14"
KV_BELOW_CONTEXT_WARNING_SINCE = "0.5.23"
# NIXL before 0.5.23 never reads --disaggregation-ib-device (nixl/conn.py has no ib_device until
# _resolve_ucx_device_list in 0.5.23, PR #28737): with UCX_NET_DEVICES unset UCX opens every device, and
# transfers hang to the timeout on fabrics where some rails do not reach the peer.
NIXL_IB_DEVICE_IGNORED = Incident("nixl-ib-device-ignored", f"{GH}/pull/28737", f"{GH}/pull/28737", None, "0.5.23")
# Decode radix cache (--disaggregation-decode-enable-radix-cache, first in 0.5.11: pd_disaggregation_hook /
# server_args.py) with decode KV offload: DecodeKVCacheOffloadManager._release_finished_req (disaggregation/
# decode_kvcache_offload_manager.py) frees the request's whole row `[0, kv_allocated_len)` and subtracts
# len(req.prefix_indices) from tree_cache.protected_size_ by hand (0.5.20: lines 250 and 254), which the
# prealloc's inc_lock_ref never added: after the first finished request the invariant checker raises "...
# memory leak detected! ... protected=-N" (SGLANG_ENABLE_STRICT_MEM_CHECK_DURING_IDLE, default True) and the
# decode exits. No start-up guard in any release. Fixed in 0.5.21 (lines 347-350: frees from
# cache_protected_len, unpins the tree lock), the fix sglang PR #27687 proposed for sglang#27666.
DECODE_RADIX_OFFLOAD = Incident("decode-radix-offload", f"{GH}/issues/27666", f"{GH}/pull/27687", "0.5.11", "0.5.21")
# Decode radix cache + HiCache with an L3 storage backend on decode (the decode HiCache mixin, disaggregation/
# decode_hicache_mixin.py, first in 0.5.13; 0.5.12 has none): _start_hicache_prefetch keeps the queried
# l3_storage_hit_length when the storage prefetch is declined (below the prefetch threshold, rate limited, host
# memory short), so decode promises prefill a prefix nothing loads and the restore fails ("HiCache load_back
# failed for rid=..."; the request fails with "HiCache restore failed", decode.py:2769-2772 in 0.5.22). Typical
# after a decode restart (L1/L2 empty, every hit from L3). 0.5.23 clears the span (decode_hicache_mixin.py:154-156,
# `if not (prefix_match.prefetch_registered or ticketed)`); 0.5.13-0.5.22 lack it (read: 0.5.13, 0.5.14,
# 0.5.16-0.5.22). The proposed fix of the report: PR #31881.
DECODE_HICACHE_L3 = Incident("decode-hicache-l3", f"{GH}/issues/30322", f"{GH}/pull/31881", "0.5.13", "0.5.23")
# DeepSeek-V4 (deepseek_v4 / deepseek_v41 configs: DeepseekV4ForCausalLM, DeepSeekV4TokenToKVPool) on a PD decode:
# a KV-full retraction backs the request's KV up to the CPU (release_req -> offload_kv_cache -> get_cpu_copy:
# unconditional in decode mode 0.5.12-0.5.17, the `cpu_tensor` retraction backup 0.5.18-0.5.21, which
# kv_cache_builder picks for this pool: it is neither MHATokenToKVPool nor SWAKVPool), and the pool has no
# get_cpu_copy: KVCache.get_cpu_copy raises NotImplementedError() (mem_cache/memory_pool.py; 0.5.20: line 1920-1921)
# and the decode scheduler dies. 0.5.22 recomputes instead (mem_cache/common.py:299 dsv4_needs_rebootstrap, "No
# DeepSeek-V4 pool keeps a host copy of a request's KV; the prefill recomputes it."). 0.5.21 adds the backup
# `none` (retracted requests are aborted with 503, no CPU copy).
DSV4_DECODE_RETRACTION = Incident("dsv4-decode-retraction", f"{GH}/issues/33385", None, "0.5.12", "0.5.22")
DSV4_RETRACTION_NONE_SINCE = "0.5.21"
# Speculative decoding (EAGLE/NEXTN) on decode only, DP attention on decode, a DSA model whose MTP draft reuses the
# indexer top-k (config index_share_for_mtp_iteration, GLM-5.2): eagle_worker_v2.py::draft turns the draft CUDA
# graph off on a rank whose request has no seeded top-k (`draft_input.dsa_topk_indices is None`; 0.5.23: lines
# 673-679), while idle DP ranks keep it on: the ranks run different collectives and decode deadlocks at warm-up.
# A prefill that runs the draft too sends the seed (disaggregation/prefill.py: req.output_dsa_topk_indices, 0.5.16
# line 669), so the first draft has it. The check is in 0.5.16-0.5.23, not in 0.5.14/0.5.15 (no seeding); no fix.
SPEC_DECODE_ONLY_DP_ATTENTION = Incident("spec-decode-only-dp-attention", f"{GH}/issues/32527", f"{GH}/pull/32209",
                                         "0.5.16", None)
