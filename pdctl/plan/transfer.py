"""Descriptor and byte counts of one request's KV transfer, per (prefill rank, decode rank) pair.

Counted as SGLang 0.5.23 puts them on the wire (tests/sglang/test_differential.py holds these counts against
SGLang's own send paths): the prompt goes out in one send per chunked-prefill chunk. Equal attention TP sends
whole pages, and SGLang merges runs of contiguous pages into one descriptor per layer K/V (pages of a fresh
request are contiguous: one descriptor per layer K/V per send); unequal TP takes the head-slice path (one
descriptor per token per layer K/V, only the decode rank's heads) unless the staging buffer is on, which
gathers a send's head slices and writes them as one bulk descriptor per prefill rank (writer) per send; SWA
layers send their window pages once, with the last chunk; MLA sends one latent buffer per layer from one
prefill rank. Numbers people can hold against a NIXL/Mooncake trace or a bench-transfer run.

Besides the KV pages, a request carries state components (disaggregation/utils.py::setup_state_kv_args):
a hybrid linear-attention model's mamba state (StateType.MAMBA: one conv + SSM slot per request per linear
layer, head-sharded; with unequal TP each decode rank gets its slice of the prefill ranks' slots) and a DSA
model's indexer keys (StateType.DSA: per token per layer, whole on every decode rank). `states` lists them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from pdctl.models.spec import ModelSpec
from pdctl.plan.heads import head_slice_params, heads_on_rank, prefill_peers, ratio_ok
from pdctl.plan.windows import full_pages, send_chunks, swa_window_pages

# SGLang's fallback chunk size where the staging grid and the sends need one ("cps or 8192")
DEFAULT_CHUNK_TOKENS = 8192

# bits per cached KV element by --kv-cache-dtype; "auto" follows the bf16 checkpoints pdctl targets.
DTYPE_BITS: dict[str, int] = {
    "auto": 16, "bf16": 16, "bfloat16": 16, "fp16": 16, "float16": 16, "half": 16,
    "fp32": 32, "float32": 32, "float": 32,
    "fp8_e4m3": 8, "fp8_e5m2": 8, "fp8": 8, "mxfp8": 8,
    "nvfp4": 4, "fp4_mx_block16": 4, "fp4_e2m1": 4,
}


def dtype_bits(kv_cache_dtype: str | None, auto_bits: int = 16) -> int:
    """Bits of one cached element (block-scale factors of mx/nv formats are ignored: a few percent).

    `auto` means the checkpoint's dtype: bf16 for the models pdctl targets, float32 on the reference engine
    (callers pass `auto_bits=32` there).
    """
    key = str(kv_cache_dtype or "auto").lower()
    return auto_bits if key == "auto" else DTYPE_BITS.get(key, 16)


def dtype_bytes(kv_cache_dtype: str | None) -> float:
    """Bytes of one cached element (0.5 for the 4-bit formats)."""
    return dtype_bits(kv_cache_dtype) / 8


@dataclass(frozen=True)
class RankPair:
    """One (prefill rank, decode rank) pair of a request's transfer."""

    prefill_rank: int
    decode_rank: int
    src_head_start: int
    num_heads: int
    dst_head_start: int
    full_descriptors: int
    full_bytes: int
    swa_descriptors: int
    swa_bytes: int

    @property
    def descriptors(self) -> int:
        """All descriptors of this pair (full-attention + SWA window)."""
        return self.full_descriptors + self.swa_descriptors

    @property
    def bytes(self) -> int:
        """All bytes of this pair (full-attention + SWA window)."""
        return self.full_bytes + self.swa_bytes


@dataclass(frozen=True)
class StateTransfer:
    """One state component of a request: what each decode rank receives."""

    kind: str  # mamba | dsa
    layers: int
    bytes_per_decode_rank: int
    decode_ranks: int
    how: str

    @property
    def bytes(self) -> int:
        """Bytes over all decode ranks."""
        return self.bytes_per_decode_rank * self.decode_ranks


def state_transfers(spec: ModelSpec, *, prefill_tp: int, decode_tp: int, tokens_sent: int) -> list[StateTransfer]:
    """The state components of one request (TOKENS_SENT: the tokens whose KV goes, page-aligned)."""
    out: list[StateTransfer] = []
    if spec.linear is not None and spec.linear_layers:
        per_rank = spec.state_bytes_per_request(decode_tp)
        if prefill_tp == decode_tp:
            how = "whole slot per rank pair (equal TP)"
        elif prefill_tp > decode_tp:
            how = f"each decode rank gathers {prefill_tp // decode_tp} prefill ranks' slices of its heads"
        else:
            how = f"each prefill rank's slot is split into {decode_tp // prefill_tp} decode ranks' slices"
        out.append(StateTransfer("mamba", len(spec.linear_layers), per_rank, decode_tp,
                                 f"conv {spec.linear.conv_state_bytes(decode_tp) * len(spec.linear_layers)} B + "
                                 f"SSM {spec.linear.temporal_state_bytes(decode_tp) * len(spec.linear_layers)} B "
                                 f"per decode rank; {how}"))
    if spec.dsa:
        out.append(StateTransfer("dsa", len(spec.kv_layers), tokens_sent * spec.indexer_bytes_per_token(), decode_tp,
                                 f"indexer keys {spec.indexer_bytes_per_token()} B/token over all layers, whole on "
                                 "every decode rank (not sharded by TP)"))
    return out


@dataclass(frozen=True)
class TransferPlan:
    """The plan of one request of `tokens` prompt tokens; `path` is page | head-slice | staging | mla.

    `sends`: how many transfers the prompt's full-attention KV takes (one per chunked-prefill chunk)."""

    tokens: int
    prefix_len: int
    page_size: int
    chunk_tokens: int | None
    sends: int
    prefill_attn_tp: int
    decode_attn_tp: int
    kv_cache_dtype: str
    dtype_bytes: float
    path: str
    full_layers: int
    swa_layers: int
    full_pages: int
    swa_pages: int
    pairs: list[RankPair] = field(default_factory=list)
    states: list[StateTransfer] = field(default_factory=list)

    @property
    def total_descriptors(self) -> int:
        """Descriptors over all rank pairs."""
        return sum(p.descriptors for p in self.pairs)

    @property
    def total_bytes(self) -> int:
        """Bytes over all rank pairs (with replicated heads, more than one copy of the KV)."""
        return sum(p.bytes for p in self.pairs)

    def to_dict(self) -> dict[str, Any]:
        """JSON view: the plan, each pair with its totals, and the grand totals."""
        d = asdict(self)
        d["pairs"] = [{**asdict(p), "descriptors": p.descriptors, "bytes": p.bytes} for p in self.pairs]
        d["total_descriptors"] = self.total_descriptors
        d["total_bytes"] = self.total_bytes
        d["states"] = [{**asdict(st), "bytes": st.bytes} for st in self.states]
        d["total_state_bytes"] = sum(st.bytes for st in self.states)
        return d


def plan_transfer(
    spec: ModelSpec,
    *,
    tokens: int,
    prefill_tp: int,
    decode_tp: int,
    page_size: int,
    kv_cache_dtype: str = "auto",
    hybrid_swa_memory: bool = True,
    prefix_len: int = 0,
    auto_bits: int = 16,
    chunk_tokens: int | None = DEFAULT_CHUNK_TOKENS,
    staging: bool = False,
) -> TransferPlan:
    """Count descriptors and bytes per rank pair for one request (pure; `transfer_plan` feeds it a topology).

    `prefill_tp`/`decode_tp` are attention TP sizes. Layers are summed over pipeline stages: PP splits them but
    does not change what one TP rank pair moves in total. `chunk_tokens`: chunked_prefill_size (None or <= 0:
    one send). `staging`: SGLANG_DISAGG_STAGING_BUFFER (used by SGLang for unequal TP, non-MLA, only).
    """
    if tokens < 1:
        raise ValueError(f"tokens must be positive, got {tokens}")
    if not ratio_ok(prefill_tp, decode_tp):
        raise ValueError(f"attention TP sizes {prefill_tp} and {decode_tp}: neither divides the other")
    bits = dtype_bits(kv_cache_dtype, auto_bits)
    swa = spec.hybrid_swa and hybrid_swa_memory and not spec.mla
    n_swa = len(spec.swa_layers) if swa else 0
    n_kv = len(spec.kv_layers)  # linear-attention layers send a state, not KV pages
    n_full = n_kv - n_swa
    fp = len(full_pages(tokens, prefix_len, page_size))
    sp = len(swa_window_pages(tokens, prefix_len, spec.sliding_window or 1, page_size)) if swa else 0
    equal = prefill_tp == decode_tp
    sends = len(send_chunks(tokens, prefix_len, page_size, chunk_tokens))
    swa_runs = 1 if sp else 0  # the window pages go once, contiguous: one run
    staged = staging and not equal and not spec.mla
    path = "mla" if spec.mla else ("page" if equal else ("staging" if staged else "head-slice"))
    pairs: list[RankPair] = []
    for d in range(decode_tp):
        peers = prefill_peers(prefill_tp, decode_tp, d)
        for p in peers:
            if spec.mla:
                # One latent buffer per layer, replicated on every rank: only the first peer sends real KV.
                real = p == peers[0]
                per_page = page_size * spec.kv_elems_per_token() * bits // 8
                n_desc = sends * n_kv if real else 0
                pairs.append(RankPair(p, d, 0, 1, 0, n_desc, fp * n_kv * per_page if real else 0, 0, 0))
                continue
            hs = head_slice_params(prefill_tp, decode_tp, p, d, spec.num_kv_heads)
            if equal:  # whole pages, contiguous runs merged: one descriptor per layer K/V per send
                item = page_size * heads_on_rank(spec.num_kv_heads, prefill_tp) * spec.head_dim * bits // 8
                pairs.append(RankPair(p, d, hs.src_head_start, hs.num_heads, hs.dst_head_start,
                                      sends * n_full * 2, fp * n_full * 2 * item,
                                      swa_runs * n_swa * 2, sp * n_swa * 2 * item))
                continue
            block = hs.num_heads * spec.head_dim * bits // 8
            full_tokens, swa_tokens = fp * page_size * n_full * 2, sp * page_size * n_swa * 2
            full_d = sends if staged else full_tokens  # staging: one bulk write per writer per send
            pairs.append(RankPair(p, d, hs.src_head_start, hs.num_heads, hs.dst_head_start,
                                  full_d, full_tokens * block, swa_tokens, swa_tokens * block))
    return TransferPlan(
        tokens=tokens, prefix_len=prefix_len, page_size=page_size, chunk_tokens=chunk_tokens, sends=sends,
        prefill_attn_tp=prefill_tp,
        decode_attn_tp=decode_tp, kv_cache_dtype=str(kv_cache_dtype), dtype_bytes=bits / 8, path=path,
        full_layers=n_full, swa_layers=n_swa, full_pages=fp, swa_pages=sp, pairs=pairs,
        states=state_transfers(spec, prefill_tp=prefill_tp, decode_tp=decode_tp, tokens_sent=fp * page_size),
    )


def transfer_plan(topo: Any, spec: ModelSpec, tokens: int, prefix_len: int = 0, *,
                  roles: tuple[Any, Any] | None = None) -> TransferPlan:
    """`plan_transfer` for a topology: attention TPs, prefill's page size, KV dtype and chunk size, SWA pools,
    the staging buffer. ROLES: (prefill, decode) as check-compat reads them from the rendered commands
    (pdctl.compat.effective); default: the topology's roles.

    The reference engine caches float32, so its `auto` dtype counts 4 bytes per element.
    """
    pre, dec = roles if roles is not None else (topo.prefill, topo.decode)
    staging = getattr(pre, "staging", None)
    staging = bool(topo.transfer.staging_buffer) if staging is None else staging
    chunk = pre.chunked_prefill_size
    chunk = DEFAULT_CHUNK_TOKENS if chunk is None else chunk
    return plan_transfer(
        spec,
        tokens=tokens,
        prefill_tp=pre.attn_tp,
        decode_tp=dec.attn_tp,
        page_size=pre.page_size,
        kv_cache_dtype=pre.kv_cache_dtype,
        hybrid_swa_memory=bool(pre.hybrid_swa_memory and dec.hybrid_swa_memory),
        prefix_len=prefix_len,
        auto_bits=32 if getattr(topo.engine, "kind", "sglang") == "reference" else 16,
        chunk_tokens=chunk,
        staging=staging,
    )
