"""The rule table of check-compat (COMPAT.md): id, severity, failure stage, check, fix, summary.

Order is the order the table prints: the command lines, the handshake, head mapping, the head-slice transfer,
memory modes, cross-role agreement, platform, then the field incidents (`incident=`: the public report;
SGLang has no guard of its own for these). Rules marked `colocated=True` also run on a `mode: colocated`
topology (they are about one server, not a PD pair). The stage is where SGLang fails without the rule.
"""

from __future__ import annotations

from pdctl.compat import (
    capacity,
    dp,
    flags,
    generations,
    handshake,
    heads,
    memory,
    platform,
    roles,
    swa,
    timeouts,
)
from pdctl.compat.findings import Rule
from pdctl.sglang import incidents

ARGS = "argument parsing"
LOAD = "model load"
HANDSHAKE = "handshake"
REGISTRATION = "registration"
TRANSFER = "first transfer"
SILENT = "silent corruption"
NOT_RENDERED = "not rendered"

RULES: list[Rule] = [
    Rule("flags-parse", "error", ARGS, flags.flags_parse,
         "fix the flag named (spelling, a value from the allowed choices, a number), or pin engine.version to "
         "the SGLang release that has it",
         "a rendered command does not parse with the SGLang release's flag table", colocated=True),
    Rule("flags-deprecated", "warning", ARGS, flags.flags_deprecated,
         "use the replacement flag named; deprecated spellings are removed in a later release",
         "a rendered command uses a deprecated flag",
         colocated=True),
    Rule("reference-ignores-args", "warning", NOT_RENDERED, flags.reference_ignores_args,
         "remove the flag from args:, or rehearse it where it runs (SGLang): the reference engine cannot",
         "the CPU reference engine ignores an SGLang flag given in args: (a rehearsal would silently run "
         "without it)", colocated=True),
    Rule("args-override", "error", NOT_RENDERED, flags.args_override,
         "remove the flag from args: and set the topology key named instead",
         "an args: flag duplicates (or removes) a flag pdctl renders from a topology key", colocated=True),
    Rule("page-size-match", "error", HANDSHAKE, handshake.page_size_match,
         "set one page_size for both roles (server.page_size, no per-role override)",
         "prefill and decode page_size differ"),
    Rule("kv-dtype-match", "error", HANDSHAKE, handshake.kv_dtype_match,
         "set one kv_cache_dtype for both roles (server.kv_cache_dtype), spelled the same",
         "prefill and decode kv_cache_dtype differ"),
    Rule("pp-pairing", "error", HANDSHAKE, handshake.pp_pairing,
         "give decode the same pp as prefill, or pp: 1",
         "decode.pp is neither prefill.pp nor 1"),
    Rule("heads-divisible", "error", LOAD, heads.heads_divisible,
         "choose tp (tp / dp with enable_dp_attention) dividing the attention heads and dividing or divisible "
         "by the KV heads",
         "attention TP does not split the heads into whole heads",
         colocated=True),
    Rule("attn-tp-ratio", "error", TRANSFER, heads.attn_tp_ratio,
         "make one role's attention TP a multiple of the other's (e.g. 1 -> 2/4/8, 2 -> 4, 8 -> 2)",
         "prefill and decode attention TP are not multiples of each other"),
    Rule("nixl-tp-over-heads", "error", REGISTRATION, heads.nixl_tp_over_heads,
         "use transfer.backend: mooncake, or TP sizes that keep prefill attention TP <= the KV heads",
         "NIXL, non-MLA, decode TP > prefill TP and NIXL's head groups do not tile a prefill page (e.g. decode attention TP > prefill attention TP > KV heads)"),
    Rule("gqa-replication-version", "error", SILENT, heads.gqa_replication_version,
         "upgrade SGLang (mooncake >= 0.5.16, nixl >= 0.5.17), or keep decode attention TP <= the KV heads",
         "unequal TP with decode attention TP > KV heads on a release with the modulo head map"),
    Rule("hetero-tp-swa-pp", "error", TRANSFER, swa.hetero_tp_swa_pp,
         "use pp: 1 on both roles, or equal attention TP, or hybrid_swa_memory: false",
         "unequal TP + hybrid SWA + non-MLA + pp > 1"),
    Rule("hetero-tp-swa-layout", "error", TRANSFER, swa.hetero_tp_swa_layout,
         "use kv_layout: nhd on both roles (SGLang's layout on CUDA), or equal attention TP",
         "unequal TP + hybrid SWA + non-MLA + layout not NHD"),
    Rule("hetero-tp-swa-buffers", "error", TRANSFER, swa.hetero_tp_swa_buffers,
         "set unified_memory: false on both roles, or use equal attention TP",
         "unequal TP + hybrid SWA + non-MLA + unified memory"),
    Rule("hetero-tp-mxfp8", "error", HANDSHAKE, swa.hetero_tp_mxfp8,
         "use equal attention TP with mxfp8, or kv_cache_dtype fp8_e4m3 / auto",
         "unequal TP + non-MLA + mxfp8 KV"),
    Rule("hetero-tp-swa-version", "error", TRANSFER, swa.hetero_tp_swa_version,
         "upgrade SGLang to >= 0.5.22, or set hybrid_swa_memory: false, or use equal attention TP",
         "unequal TP + hybrid SWA + non-MLA on SGLang < 0.5.22"),
    Rule("hybrid-swa-memory-match", "warning", TRANSFER, swa.hybrid_swa_memory_match,
         "set hybrid_swa_memory under server: (same on both roles)",
         "a hybrid-SWA model with hybrid_swa_memory on one role only"),
    Rule("mxfp8-gpu", "error", ARGS, platform.mxfp8_gpu,
         "run mxfp8 KV on gb300 / gb200 / b200 nodes, or use kv_cache_dtype fp8_e4m3",
         "mxfp8 KV on a GPU that is not SM100+",
         colocated=True),
    Rule("unified-memory-backend", "error", ARGS, memory.unified_memory_backend,
         "use transfer.backend: mooncake with protocol: rdma, or unified_memory: false",
         "unified memory with a backend other than mooncake (RDMA)"),
    Rule("unified-memory-pp", "error", ARGS, memory.unified_memory_pp,
         "use pp: 1 with unified memory, or unified_memory: false",
         "unified memory with pp > 1"),
    Rule("unified-memory-tp", "error", TRANSFER, memory.unified_memory_tp,
         "use equal attention TP with unified memory, or unified_memory: false",
         "unified memory with unequal attention TP"),
    Rule("unified-memory-both", "error", TRANSFER, memory.unified_memory_both,
         "set unified_memory under server: (both roles), not under one role",
         "unified memory on one role only"),
    Rule("staging-mla", "error", LOAD, memory.staging_mla,
         "set transfer.staging_buffer: false for MLA models",
         "staging buffer with an MLA model"),
    Rule("staging-chunk", "error", LOAD, memory.staging_chunk,
         "set prefill chunked_prefill_size to a positive multiple of page_size (default 8192)",
         "staging buffer with chunked_prefill_size not a positive multiple of page_size"),
    Rule("staging-pp", "error", LOAD, memory.staging_pp,
         "use transfer.backend: mooncake, or pp: 1, or staging_buffer: false",
         "staging buffer with pp > 1 on a backend other than mooncake"),
    Rule("staging-swa-scope", "info", TRANSFER, memory.staging_swa_scope,
         "nothing to fix; expect per-token descriptors for the SWA window",
         "staging buffer + hybrid SWA + unequal TP"),
    Rule("roles-agree", "error", SILENT, roles.roles_agree,
         "run the same model path, revision, quantization and dtype on both roles (no per-role args for them)",
         "prefill and decode differ in model path, revision, quantization or dtype"),
    Rule("context-length-match", "error", TRANSFER, roles.context_length_match,
         "set context_length under server: (one value for both roles)",
         "prefill and decode context lengths differ"),
    Rule("speculative-prefill-only", "error", REGISTRATION, roles.speculative_prefill_only,
         "enable speculative decoding on decode (or on both roles), not on prefill alone",
         "speculative decoding on prefill only"),
    Rule("speculative-decode-only-version", "error", SILENT, roles.speculative_decode_only_version,
         "upgrade SGLang to >= 0.5.8, or enable speculative decoding on both roles",
         "speculative decoding on decode only, SGLang < 0.5.8"),
    Rule("attention-backend-gpu", "error", LOAD, platform.attention_backend_gpu,
         "drop attention_backend (let SGLang choose) or pick one built for the GPU (flashinfer, triton)",
         "fa3 on Blackwell; trtllm_mha on a GPU without its kernels or with an MLA model", colocated=True),
    Rule("kv-layout-platform", "error", NOT_RENDERED, platform.kv_layout_platform,
         "use kv_layout: nhd (or hnd, via SGLANG_USE_HND_KVCACHE); vectorized_5d exists on ROCm only",
         "the KV layout the processes will use differs from the topology's kv_layout", colocated=True),
    Rule("placement", "error", LOAD, platform.placement,
         "add GPUs / nodes to the role, lower replicas x tp x pp, or give roles disjoint nodes",
         "replicas need more GPUs than their nodes have, or roles overlap GPUs",
         colocated=True),
    Rule("bootstrap-port", "error", LOAD, platform.bootstrap_port,
         "move router.port, a role's port, or transfer.bootstrap_port so ranges do not overlap",
         "two processes on one machine would bind the same port",
         colocated=True),
    Rule("backend-known", "error", ARGS, platform.backend_known,
         "use transfer.backend nixl or mooncake on both roles; with protocol: tcp drop the IB device",
         "unknown or mismatched backend, or mooncake tcp with RDMA-only options"),
    # -- field incidents (pdctl/sglang/incidents.py): SGLang runs these, then fails late or answers wrongly --
    Rule("kv-capacity", "error", LOAD, capacity.kv_capacity,
         "raise mem_fraction_static, split the weights over more GPUs (tp), or use GPUs with more memory",
         "a rank's weights leave no memory for the KV cache (estimate from the weights, GPU memory, TP and "
         "mem_fraction_static)",
         colocated=True, incident=incidents.KV_NO_ROOM.report),
    Rule("kv-capacity-context", "warning", SILENT, capacity.kv_capacity_context,
         "lower context_length to what the pool holds, raise mem_fraction_static, or use more TP / GPU memory",
         "the KV pool of a role holds fewer tokens than one prompt of the context length",
         incident=incidents.ABORTED_PREFILL_GARBAGE.report),
    Rule("dp-attention-corruption", "error", SILENT, dp.dp_attention_corruption,
         "upgrade SGLang (gpt-oss >= 0.5.20, DeepSeek-V4 >= 0.5.18), or run without DP attention "
         "(or with ep_size != the attention DP size / a MoE a2a backend)",
         "DP attention on a model and release whose MoE combine double-counts (gpt-oss: TP == attention DP == "
         "EP, a2a none, 0.5.11-0.5.19; DeepSeek-V4: attention TP > 1, 0.5.12-0.5.17)", colocated=True,
         incident=incidents.GPT_OSS_DP_ATTENTION.report),
    Rule("dp-routing", "error", TRANSFER, dp.dp_routing,
         "drop the router's dp-aware; on prefill use DP attention (or replicas) instead of plain --dp-size; keep "
         "prefill's --load-balance-method follow_bootstrap_room before SGLang 0.5.10",
         "prefill DP dispatch, decode's prefill-rank lookup and the router's DP routing disagree",
         incident=incidents.PLAIN_DP_PREFILL.report),
    Rule("mixed-gpu-generations", "warning", SILENT, generations.mixed_gpu_generations,
         "run prefill and decode on one GPU generation, or measure drift first with `pdctl parity --soak N`",
         "prefill and decode run on different GPU generations (different kernels on each side)", incident=incidents.MIXED_GPU_DRIFT.report),
    Rule("mixed-gpu-page-size", "error", HANDSHAKE, generations.mixed_gpu_page_size,
         "use a page_size trtllm_mha supports (16, 32, 64, 128 from 0.5.17) on both roles, or set the same "
         "attention_backend on both",
         "one role runs trtllm_mha (SGLang's default on Blackwell) and its page size is rewritten to 64, the "
         "other keeps its page size",
         incident=incidents.MIXED_GPU_DRIFT.report),
    Rule("disagg-timeouts", "warning", TRANSFER, timeouts.disagg_timeouts,
         "keep SGLANG_DISAGGREGATION_{BOOTSTRAP,WAITING}_TIMEOUT at minutes (default 300) and the heartbeat at "
         "seconds; watch stuck transfers with `pdctl status --watch`",
         "PD timeouts in engine.env that are huge, non-positive or not parsable", incident=incidents.STUCK_TRANSFERRING.report),
]

RULES_BY_ID: dict[str, Rule] = {r.id: r for r in RULES}
