"""SGLang's KVArgs for one rank, filled the way its prefill and decode schedulers fill them.

Runs in SGLang's interpreter. Transcribes `_init_kv_manager` of disaggregation/prefill.py and decode.py for a
non-MLA model without PP, draft model or DP attention: the KV buffers (every layer's K, then every layer's
V), the aux (metadata) buffers, the state components (the SWA pool of a hybrid sliding-window model, the request
pool's mamba state of a hybrid linear-attention one), head counts, page size and the KV dtype string both sides
compare. With one of SGLang's pools, SGLang's own `setup_state_kv_args`
describes the state; for buffers that are not an SGLang pool (the reference engine's), `swa_state` says the
same thing by hand (tests/sglang_stack checks the two agree).
"""

from __future__ import annotations

from typing import Any

from pdctl.sglang_stack.runtime import mem_kinds
from pdctl.sglang_stack.spec import SideSpec

Buffers = tuple[list[int], list[int], list[int]]  # (data ptrs, data lengths, item lengths)


def kv_args(spec: SideSpec, rank: int, full: Buffers, aux: Buffers, *, pool: Any = None,
            swa: Buffers | None = None, gpu: int = 0, req_pool: Any = None) -> Any:
    """KVArgs for RANK of SPEC's role: FULL = the KV buffers, AUX = the metadata buffers; the state from
    SGLang's POOL and REQ_POOL (its `setup_state_kv_args`), or SWA's buffers when there is no SGLang pool."""
    from sglang.srt.disaggregation.utils import (
        KVClassType,
        TransferBackend,
        build_kv_layer_ids,
        get_kv_class,
        setup_state_kv_args,
    )

    args = get_kv_class(TransferBackend(spec.backend), KVClassType.KVARGS)()
    args.engine_rank = rank
    args.pp_rank = 0
    args.system_dp_rank = 0
    args.rust_http_port = None
    args.kv_cache_dtype_str = spec.kv_cache_dtype
    args.kv_layout = None  # get_pd_kv_layout: only DeepSeek-V4 pools have one
    args.prefill_start_layer = 0
    args.prefill_end_layer = None
    args.kv_data_ptrs, args.kv_data_lens, args.kv_item_lens = (list(x) for x in full)
    args.num_draft_entries = 0
    layers = len(spec.full_layers) + len(spec.swa_layers) + len(spec.linear_layers)
    # build_kv_layer_ids: [] for MHA/SWA pools (positional pairing), the full layers' model ids for a
    # HybridLinearKVPool
    args.kv_layer_ids = [] if pool is None else build_kv_layer_ids(
        token_to_kv_pool=pool, draft_token_to_kv_pool=None, num_draft_entries=0, num_hidden_layers=layers)
    args.kv_head_num = max(1, spec.kv_heads // spec.tp)
    args.total_kv_head_num = spec.kv_heads
    args.page_size = spec.page_size
    args.aux_data_ptrs, args.aux_data_lens, args.aux_item_lens = (list(x) for x in aux)
    args.ib_device = None
    args.gpu_id = gpu  # the device the pools live on (VRAM); an id only on DRAM
    if spec.backend == "nixl":
        args.kv_data_mem_kinds = mem_kinds(spec, len(args.kv_data_ptrs))
    if pool is not None:
        setup_state_kv_args(args, pool, None, layers, req_to_token_pool=req_pool)
    else:
        swa_state(args, swa, spec.kv_layout)
    return args


def swa_state(args: Any, swa: Buffers | None, layout: str) -> None:
    """The state fields `setup_state_kv_args` sets for an SWAKVPool of two MHA pools (or for no state)."""
    from sglang.srt.disaggregation.base.conn import StateType
    from sglang.srt.disaggregation.utils import append_state_component

    args.state_types = []
    args.state_data_ptrs = []
    args.state_data_lens = []
    args.state_item_lens = []
    args.state_dim_per_tensor = []
    args.state_slice_outer_counts = []
    args.state_layer_ids = []
    args.is_hybrid_mla_backend = False
    args.state_conv_shard_groups = []
    args.swa_kv_cache_layout = None
    args.mla_compression_ratios = None
    if swa is not None:
        ptrs, lens, items = (list(x) for x in swa)
        append_state_component(args, StateType.SWA, ptrs, lens, items)
        args.swa_kv_cache_layout = layout
