"""Tensor-parallel execution: N ranks in one process, each with its weight shard and its own KV pools.

`TPModel.forward(segments)` runs one model step over a batch of sequence segments (prefill chunks and
decode tokens mixed): every rank computes its heads' q/k/v, writes K/V into its pages, attends by reading
K/V back from its pages, and produces chunk partials of the attention/MLP outputs that the all-reduce sums
in global chunk order (see pdctl.reference.model: every TP size computes exactly what TP1 computes).

Attention runs in query chunks aligned to absolute page boundaries, each over a canonical key range (full
layers: from position 0; sliding layers: from the page holding position `chunk_start - window`). A chunk's
arithmetic therefore depends only on the sequence, never on how much of it was prefix-cached or on what
else is in the batch: warm == cold and batched == sequential, bit for bit — with the default `exact`
numerics. `--numerics gpu-like` (pdctl.reference.numerics) rounds and orders the same operations the way
bf16 GPU kernels do, so that results then depend on batch, chunking and TP, reproducibly.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pdctl.reference.config import ModelConfig
from pdctl.reference.kvcache import KVCache, KVPool, SeqPages
from pdctl.reference.model import (
    LayerShard,
    apply_rope,
    head_shard,
    rms_norm,
    rope_tables,
    shard_layers,
    validate_tp,
)
from pdctl.reference.numerics import ExactNumerics, Numerics


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

    def __init__(
        self, cfg: ModelConfig, tensors: dict[str, torch.Tensor], tp: int, kv: KVCache, numerics: Numerics | None = None
    ) -> None:
        validate_tp(cfg, tp)
        self.num = numerics or ExactNumerics()
        tensors = {name: self.num.weight(t) for name, t in tensors.items()}
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
        cfg, num = self.cfg, self.num
        tokens = [t for s in segments for t in s.tokens]
        num.begin_step(len(tokens))
        pos = torch.tensor([p for s in segments for p in range(s.start, s.end)], dtype=torch.long)
        x = self.embed[torch.tensor(tokens, dtype=torch.long)]
        cos, sin = self.cos[pos], self.sin[pos]
        slots = {"full": self._slots(segments, "full"), "swa": self._slots(segments, "swa") if self.kv.swa_layers else None}
        for li in range(cfg.num_hidden_layers):
            kind = "swa" if self.kv.is_swa_layer(li) else "full"
            window = cfg.sliding_window if cfg.is_sliding(li) else None
            h = num.act(rms_norm(x, self.layers[0][li].input_norm, cfg.rms_norm_eps))
            partials = [
                self._attn_rank(r, li, h, cos, sin, segments, slots[kind], kind, window) for r in range(self.tp)
            ]
            x = num.act(x + num.all_reduce(partials))
            h = num.act(rms_norm(x, self.layers[0][li].post_norm, cfg.rms_norm_eps))
            x = num.act(x + num.all_reduce([self._mlp_rank(self.layers[r][li], h) for r in range(self.tp)]))
        rows, offset = [], 0
        for s in segments:
            rows.append(torch.arange(offset + s.logits_from, offset + len(s.tokens)))
            offset += len(s.tokens)
        sel = torch.cat(rows)
        logits = num.logits(num.act(rms_norm(x[sel], self.final_norm, cfg.rms_norm_eps)), self.lm_head)
        return list(torch.split(logits, [len(r) for r in rows]))

    def _mlp_rank(self, layer: LayerShard, h: torch.Tensor) -> torch.Tensor:
        """This rank's partials of the SwiGLU MLP output (summed by the all-reduce)."""
        num = self.num
        inner = num.act(torch.nn.functional.silu(num.linear(h, layer.gate)) * num.linear(h, layer.up))
        return num.row_parallel(inner, layer.down)

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
        layer, shard, num = self.layers[rank][li], self.shards[rank], self.num
        d, n = self.cfg.head_dim, h.shape[0]
        q = num.act(apply_rope(num.linear(h, layer.q).view(n, shard.q_heads, d), cos, sin))
        k = num.act(apply_rope(num.linear(h, layer.k).view(n, shard.kv_heads, d), cos, sin))
        v = num.linear(h, layer.v).view(n, shard.kv_heads, d)
        pool = self.kv.ranks[rank].pool_for(li)
        pool.write(li, slots[0], slots[1], k, v)
        qt = q.transpose(0, 1)  # [heads, n, d]
        group = shard.q_heads // shard.kv_heads
        out = torch.empty_like(qt)
        row = 0
        for s in segments:
            self._attend_segment(pool, li, s, kind, window, group, qt, out, row)
            row += len(s.tokens)
        return num.row_parallel(out.transpose(0, 1).reshape(n, shard.q_heads * d), layer.o)

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
            out[:, a:b] = self.num.attend(
                qt[:, a:b], kh[:, ks - base : c1 - base], vh[:, ks - base : c1 - base], q_pos, k_pos, window
            )
            c0 = c1

