"""The KV transfer plan: head ownership, per-token block addresses, descriptor/byte counts (SGLang 0.5.23).

Used by check-compat and `pdctl plan`, by the reference engine's transfer, and by bench-transfer, so that all
of them move exactly the bytes SGLang would. numpy is only imported when blocks are built.
"""

from pdctl.plan.blocks import (
    HeadSliceError,
    head_slice_blocks,
    merge_contiguous,
    page_blocks,
    split_kv_entries,
)
from pdctl.plan.heads import (
    HeadSlice,
    decode_peers,
    global_head,
    head_slice_params,
    heads_on_rank,
    ownership_map,
    prefill_peers,
    ratio_ok,
    replication,
)
from pdctl.plan.transfer import RankPair, TransferPlan, dtype_bits, dtype_bytes, plan_transfer, transfer_plan
from pdctl.plan.windows import full_pages, swa_window_pages

__all__ = [
    "HeadSlice", "HeadSliceError", "RankPair", "TransferPlan", "decode_peers", "dtype_bits", "dtype_bytes", "full_pages",
    "global_head", "head_slice_blocks", "head_slice_params", "heads_on_rank", "merge_contiguous",
    "ownership_map", "page_blocks", "plan_transfer", "prefill_peers", "ratio_ok", "replication",
    "split_kv_entries", "swa_window_pages", "transfer_plan",
]
