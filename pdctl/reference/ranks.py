"""Tensor-parallel execution: N ranks in one process, each with its weight shard and its own KV pools.

`TPModel.forward(segments)` runs one model step over a batch of sequence segments (prefill chunks and
decode tokens mixed): every rank computes its heads' q/k/v, writes K/V into its pages, attends by reading
K/V back from its pages, and produces chunk partials of the attention/MLP outputs that the all-reduce sums
in global chunk order (see pdctl.reference.model: every TP size computes exactly what TP1 computes).

Attention runs in query chunks aligned to absolute page boundaries, each over a canonical key range (full
layers: from position 0; sliding layers: from the page holding position `chunk_start - window`). A chunk's
arithmetic therefore depends only on the sequence, never on how much of it was prefix-cached or on what
else is in the batch: warm == cold and batched == sequential, bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pdctl.reference.config import ModelConfig
from pdctl.reference.kvcache import KVCache, KVPool, SeqPages
from pdctl.reference.model import (
    apply_rope,
    attend,
    chunked_linear,
    head_shard,
    linear,
    mlp_partial,
    reduce_chunks,
    rms_norm,
    rope_tables,
    shard_layers,
    validate_tp,
)


@dataclass
class Segment:
    """Tokens of one sequence to run at positions start.. ; logits are returned for rows >= logits_from."""

    seq: SeqPages
    tokens: list[int]
    start: int
    logits_from: int

    @property
    def end(self) -> int:
        """Position after the last token."""
        return self.start + len(self.tokens)


class TPModel:
    """The model split over `tp` ranks, with the KV cache those ranks write and read."""

    def __init__(self, cfg: ModelConfig, tensors: dict[str, torch.Tensor], tp: int, kv: KVCache) -> None:
        validate_tp(cfg, tp)
        self.cfg = cfg
        self.tp = tp
        self.kv = kv
        self.page_size = kv.page_size
        self.embed = tensors["model.embed_tokens.weight"].contiguous()
        self.final_norm = tensors["model.norm.weight"].contiguous()
        self.lm_head = tensors["lm_head.weight"].contiguous()
        self.shards = [head_shard(cfg, tp, r) for r in range(tp)]
        self.layers = [shard_layers(cfg, tensors, s) for s in self.shards]  # [rank][layer]
        self.cos, self.sin = rope_tables(cfg)

    @torch.inference_mode()
    def forward(self, segments: list[Segment]) -> list[torch.Tensor]:
        """Run SEGMENTS through the model (pages must already be allocated); logits rows per segment."""
        cfg = self.cfg
        tokens = [t for s in segments for t in s.tokens]
        pos = torch.tensor([p for s in segments for p in range(s.start, s.end)], dtype=torch.long)
        x = self.embed[torch.tensor(tokens, dtype=torch.long)]
        cos, sin = self.cos[pos], self.sin[pos]
        slots = {"full": self._slots(segments, "full"), "swa": self._slots(segments, "swa") if self.kv.swa_layers else None}
        for li in range(cfg.num_hidden_layers):
            kind = "swa" if self.kv.is_swa_layer(li) else "full"
            window = cfg.sliding_window if cfg.is_sliding(li) else None
            h = rms_norm(x, self.layers[0][li].input_norm, cfg.rms_norm_eps)
            partials = [
                self._attn_rank(r, li, h, cos, sin, segments, slots[kind], kind, window) for r in range(self.tp)
            ]
            x = x + reduce_chunks(partials)
            h = rms_norm(x, self.layers[0][li].post_norm, cfg.rms_norm_eps)
            x = x + reduce_chunks([mlp_partial(self.layers[r][li], h) for r in range(self.tp)])
        rows, offset = [], 0
        for s in segments:
            rows.append(torch.arange(offset + s.logits_from, offset + len(s.tokens)))
            offset += len(s.tokens)
        sel = torch.cat(rows)
        logits = linear(rms_norm(x[sel], self.final_norm, cfg.rms_norm_eps), self.lm_head)
        return list(torch.split(logits, [len(r) for r in rows]))

    def _slots(self, segments: list[Segment], kind: str) -> tuple[torch.Tensor, torch.Tensor]:
        ps = self.page_size
        pages, offs = [], []
        for s in segments:
            table = s.seq.full if kind == "full" else s.seq.swa
            for p in range(s.start, s.end):
                page = table[p // ps]
                if page < 0:
                    raise RuntimeError(f"write to released SWA page (position {p})")
                pages.append(page)
                offs.append(p % ps)
        return torch.tensor(pages, dtype=torch.long), torch.tensor(offs, dtype=torch.long)

    def _attn_rank(
        self,
        rank: int,
        li: int,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        segments: list[Segment],
        slots: tuple[torch.Tensor, torch.Tensor],
        kind: str,
        window: int | None,
    ) -> torch.Tensor:
        layer, shard = self.layers[rank][li], self.shards[rank]
        d, n = self.cfg.head_dim, h.shape[0]
        q = apply_rope(linear(h, layer.q).view(n, shard.q_heads, d), cos, sin)
        k = apply_rope(linear(h, layer.k).view(n, shard.kv_heads, d), cos, sin)
        v = linear(h, layer.v).view(n, shard.kv_heads, d)
        pool = self.kv.ranks[rank].pool_for(li)
        pool.write(li, slots[0], slots[1], k, v)
        qt = q.transpose(0, 1)  # [heads, n, d]
        group = shard.q_heads // shard.kv_heads
        out = torch.empty_like(qt)
        row = 0
        for s in segments:
            self._attend_segment(pool, li, s, kind, window, group, qt, out, row)
            row += len(s.tokens)
        return chunked_linear(out.transpose(0, 1).reshape(n, shard.q_heads * d), layer.o)

    def _key_start(self, chunk_start: int, window: int | None) -> int:
        if window is None:
            return 0
        ps = self.page_size
        return (max(0, chunk_start - window) // ps) * ps

    def _attend_segment(
        self,
        pool: KVPool,
        li: int,
        s: Segment,
        kind: str,
        window: int | None,
        group: int,
        qt: torch.Tensor,
        out: torch.Tensor,
        row: int,
    ) -> None:
        ps = self.page_size
        table = s.seq.full if kind == "full" else s.seq.swa
        k0 = self._key_start(s.start, window)
        lp = list(range(k0 // ps, (s.end - 1) // ps + 1))
        phys = [table[i] for i in lp]
        if min(phys) < 0:
            raise RuntimeError(f"layer {li}: attention needs a released SWA page (positions from {k0})")
        kr, vr = pool.read(li, torch.tensor(phys, dtype=torch.long))
        base = lp[0] * ps
        kh = kr.transpose(0, 1).repeat_interleave(group, dim=0)  # [q heads, S, d]
        vh = vr.transpose(0, 1).repeat_interleave(group, dim=0)
        c0 = s.start
        while c0 < s.end:
            c1 = min(s.end, (c0 // ps + 1) * ps)
            ks = self._key_start(c0, window)
            q_pos = torch.arange(c0, c1)
            k_pos = torch.arange(ks, c1)
            a, b = row + c0 - s.start, row + c1 - s.start
            out[:, a:b] = attend(qt[:, a:b], kh[:, ks - base : c1 - base], vh[:, ks - base : c1 - base], q_pos, k_pos, window)
            c0 = c1

