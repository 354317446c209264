"""The KV transfer term of a candidate: what one request moves (pdctl.plan), how long it takes, how busy the link is.

AIConfigurator's disaggregated TTFT is its prefill latency x 1.8 and nothing for moving the KV. pdctl counts
the request's bytes and descriptors per (prefill rank, decode rank) pair exactly as SGLang sends them (the same
pdctl.plan check-compat and bench-transfer use), for the candidate's attention TP pair at the request's ISL:
- transfer time = the slowest rank: each prefill rank posts its descriptors and sends its bytes over its own
  link, each decode rank receives its bytes over its own (ranks work in parallel, as SGLang's do);
- link load = requests per second per replica x the busiest rank's seconds per request; above 1 the link
  cannot carry the request rate the candidate promises (rule `kv-link-capacity`).
The whole transfer counts, also for prompts longer than one chunked-prefill chunk whose earlier chunks SGLang
sends while later ones compute: conservative, never optimistic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pdctl.models.spec import ModelSpec
from pdctl.plan.heads import ratio_ok
from pdctl.plan.transfer import DEFAULT_CHUNK_TOKENS, TransferPlan, plan_transfer
from pdctl.suggest.link import Link


@dataclass(frozen=True)
class KvShape:
    """What fixes one request's transfer besides the TP pair: the model and the KV settings of the topology."""

    spec: ModelSpec
    isl: int
    page_size: int = 64
    kv_cache_dtype: str = "auto"
    hybrid_swa_memory: bool = True
    chunk_tokens: int | None = None
    staging: bool = False


@dataclass(frozen=True)
class KvTerm:
    """One request's KV transfer for a candidate on a link."""

    path: str  # page | head-slice | staging | mla (pdctl.plan)
    bytes: int
    descriptors: int
    rank_bytes: int  # the busiest prefill rank's bytes
    rank_descriptors: int  # ... and descriptors
    transfer_ms: float
    link_load: float  # fraction of the busiest link's time the request rate needs (> 1: cannot carry it)

    def to_dict(self) -> dict[str, Any]:
        return {"path": self.path, "bytes": self.bytes, "descriptors": self.descriptors,
                "busiest_rank_bytes": self.rank_bytes, "busiest_rank_descriptors": self.rank_descriptors,
                "transfer_ms": round(self.transfer_ms, 3), "link_load": round(self.link_load, 4)}


class KvModel:
    """The KV term of every candidate of one suggestion (one plan per attention TP pair, computed once)."""

    def __init__(self, shape: KvShape, link: Link) -> None:
        self.shape, self.link = shape, link
        self._plans: dict[tuple[int, int], TransferPlan] = {}

    def plan(self, prefill_attn_tp: int, decode_attn_tp: int) -> TransferPlan:
        key = (prefill_attn_tp, decode_attn_tp)
        if key not in self._plans:
            s = self.shape
            self._plans[key] = plan_transfer(
                s.spec, tokens=s.isl, prefill_tp=prefill_attn_tp, decode_tp=decode_attn_tp, page_size=s.page_size,
                kv_cache_dtype=s.kv_cache_dtype, hybrid_swa_memory=s.hybrid_swa_memory,
                chunk_tokens=DEFAULT_CHUNK_TOKENS if s.chunk_tokens is None else s.chunk_tokens, staging=s.staging)
        return self._plans[key]

    def term(self, prefill_attn_tp: int, decode_attn_tp: int, *, prefill_rate: float,
             decode_rate: float) -> KvTerm | None:
        """The term for one candidate; None when the attention TPs do not map onto each other (no transfer
        SGLang can do: check-compat's attn-tp-ratio rejects the candidate). PREFILL_RATE / DECODE_RATE: requests
        per second one prefill / decode replica handles."""
        if not ratio_ok(prefill_attn_tp, decode_attn_tp):
            return None
        plan = self.plan(prefill_attn_tp, decode_attn_tp)
        sent: dict[int, list[int]] = {}
        received: dict[int, int] = {}
        for pair in plan.pairs:
            acc = sent.setdefault(pair.prefill_rank, [0, 0])
            acc[0] += pair.bytes
            acc[1] += pair.descriptors
            received[pair.decode_rank] = received.get(pair.decode_rank, 0) + pair.bytes
        send_s = {rank: self.link.seconds(b, d) for rank, (b, d) in sent.items()}
        recv_s = [self.link.seconds(b, 0) for b in received.values()]
        busiest = max(send_s, key=lambda r: send_s[r])
        seconds = max([*send_s.values(), *recv_s])
        load = max(prefill_rate * max(send_s.values()), decode_rate * max(recv_s))
        return KvTerm(plan.path, plan.total_bytes, plan.total_descriptors, sent[busiest][0], sent[busiest][1],
                      seconds * 1e3, load)
