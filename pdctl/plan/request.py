"""What bench-transfer measures, resolved from a topology: model shape, attention TPs, page size, KV bytes.

Separate from the runner so `pdctl bench-transfer --help` and bad-input errors stay cheap and the benchmark
script can build configs directly.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pdctl.errors import UserError
from pdctl.models import resolve_model_spec
from pdctl.plan import dtype_bytes, full_pages, heads_on_rank, prefill_peers, swa_window_pages


@dataclass(frozen=True)
class KVShape:
    """What one request's KV looks like: layers per pool, heads, bytes per head, pages."""

    full_layers: int
    swa_layers: int
    kv_heads: int
    head_bytes: int  # head_dim * bytes per element
    page_size: int
    full_pages: int  # pages of the request in full-attention layers
    swa_pages: int  # window pages of the request in SWA layers (0 without hybrid SWA memory)

    def pool_layers(self) -> dict[str, int]:
        """Layers of each pool the request occupies, keyed like `RankMemory.pools()` ("swa" only with window
        pages), so both bench processes plan the same pools."""
        return {"full": self.full_layers} | ({"swa": self.swa_layers} if self.swa_layers and self.swa_pages else {})

    def to_dict(self) -> dict[str, Any]:
        """JSON form, to hand the shape to the peer process."""
        return asdict(self)


@dataclass(frozen=True)
class BenchConfig:
    """Everything the bench needs, resolved from a topology (or given directly by benchmarks/tests)."""

    name: str
    backend: str
    tokens: int
    prefill_tp: int
    decode_tp: int
    page_size: int
    num_layers: int
    swa_layers: int
    kv_heads: int
    head_dim: int
    elem_bytes: float
    window: int | None
    seed: int = 0
    timeout: float = 300.0
    repeats: int = 3  # rounds of (memcpy, per-token, packed) measured side by side; best of each counts
    # Addresses the two sides' endpoints advertise (Mooncake's session host); loopback when both run here,
    # the nodes' addresses when preflight runs the two sides on a prefill and a decode node.
    prefill_host: str = "127.0.0.1"
    decode_host: str = "127.0.0.1"


def config_from_topology(topo: Any, *, backend: str | None, tokens: int, repeats: int = 3) -> BenchConfig:
    """Read the model shape (pdctl.models), attention TPs, page size, KV dtype and SWA pools of a topology."""
    pre, dec = topo.require_pd("bench-transfer")  # a colocated topology has no KV transfer: exit 2
    spec = resolve_model_spec(topo.model, engine_kind=topo.engine.kind)
    if spec.mla:
        raise UserError(f"{topo.name}: bench-transfer covers MHA/GQA KV (head slices); {spec.name} uses MLA")
    if spec.hybrid_linear:
        raise UserError(f"{topo.name}: bench-transfer moves KV pages only; {spec.name}'s mamba state "
                        "(linear-attention layers) is not benchmarked (`pdctl plan` shows what it moves)")
    limits = [r.context_length for r in (pre, dec) if r.context_length]
    if limits and tokens > min(limits):  # no request that long can reach the prefill of this deployment
        raise UserError(f"--tokens {tokens} exceeds the topology's context_length {min(limits)}")
    hybrid = spec.hybrid_swa and bool(pre.hybrid_swa_memory and dec.hybrid_swa_memory)
    dtype = str(pre.kv_cache_dtype or "auto")
    # The reference engine caches float32; SGLang's "auto" is the checkpoint's bf16.
    elem = 4.0 if topo.engine.kind == "reference" and dtype == "auto" else dtype_bytes(dtype)
    return BenchConfig(
        name=topo.name,
        backend=backend or topo.transfer.backend,
        tokens=tokens,
        prefill_tp=pre.attn_tp,
        decode_tp=dec.attn_tp,
        page_size=pre.page_size,
        num_layers=spec.num_layers,
        swa_layers=len(spec.swa_layers) if hybrid else 0,
        kv_heads=spec.num_kv_heads,
        head_dim=spec.head_dim,
        elem_bytes=elem,
        window=spec.sliding_window if hybrid else None,
        repeats=repeats,
    )


def kv_shape(cfg: BenchConfig) -> KVShape:
    """The request's pools: layers per pool, bytes per head, full pages and SWA window pages."""
    head_bytes = cfg.head_dim * cfg.elem_bytes
    if head_bytes != int(head_bytes):
        raise UserError(f"head_dim {cfg.head_dim} x {cfg.elem_bytes} bytes is not a whole number of bytes")
    swa_pages = (
        len(swa_window_pages(cfg.tokens, 0, cfg.window, cfg.page_size))
        if cfg.swa_layers and cfg.window
        else 0
    )
    return KVShape(
        full_layers=cfg.num_layers - cfg.swa_layers,
        swa_layers=cfg.swa_layers if swa_pages else 0,
        kv_heads=cfg.kv_heads,
        head_bytes=int(head_bytes),
        page_size=cfg.page_size,
        full_pages=len(full_pages(cfg.tokens, 0, cfg.page_size)),
        swa_pages=swa_pages,
    )


def heads_note(cfg: BenchConfig) -> str:
    """One line saying how heads move, for the human output."""
    return (
        f"prefill TP{cfg.prefill_tp} ({heads_on_rank(cfg.kv_heads, cfg.prefill_tp)} heads/rank) -> decode "
        f"TP{cfg.decode_tp} ({heads_on_rank(cfg.kv_heads, cfg.decode_tp)} heads/rank); decode rank 0 gets "
        f"from prefill ranks {prefill_peers(cfg.prefill_tp, cfg.decode_tp, 0)}"
    )
