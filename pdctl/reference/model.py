"""The reference transformer's math and its tensor-parallel weight shards.

Decoder-only, gpt-oss attention structure: layers alternate sliding-window / full attention (sliding first),
GQA, RoPE (rotate-half), RMSNorm, SwiGLU MLP, float32 on CPU.

TP as SGLang does it: rank r of N owns query heads [r*Q/N, (r+1)*Q/N), KV heads [r*H/N, (r+1)*H/N) (or, when
N > H, the single replicated head r // (N // H)), the matching columns of o_proj and an intermediate slice of
the MLP. Each rank's attention/MLP output is a partial sum; the caller adds the partials in rank order (the
all-reduce). Embedding, norms and lm_head are replicated.

Exact TP: the two row-parallel products (o_proj, down_proj) are computed as per-chunk partials at the
finest TP granularity (one chunk per query head for o_proj, gcd(intermediate, heads) chunks for the MLP) and
the all-reduce sums all chunks in global order. Every TP size therefore performs the very same float32
operations as TP1, so TP2/TP4 (and PD across TP sizes) reproduce TP1 bit for bit, not just within rounding.

Determinism: `linear()` pads to at least PAD_ROWS rows because oneDNN/MKL picks different kernels for very
small batches; with the padding a row's result does not depend on how many rows share the call, so batched
decode equals one-by-one decode bit for bit, and a prefix-cached prefill equals a cold one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pdctl.reference.config import ModelConfig, validate_tp  # noqa: F401 (re-exported)

PAD_ROWS = 16


def linear(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """x @ w.T with rows padded to PAD_ROWS, so each row's result is independent of the batch size."""
    n = x.shape[0]
    if n < PAD_ROWS:
        x = torch.cat([x, x.new_zeros((PAD_ROWS - n, x.shape[1]))])
        return (x @ w.T)[:n]
    return x @ w.T


def chunked_linear(x: torch.Tensor, w_chunks: torch.Tensor) -> torch.Tensor:
    """Per-chunk partial products: x `[n, c*w]` times chunks `[c, w, out]` -> `[c, n, out]` (rows padded)."""
    n = x.shape[0]
    c, width, _ = w_chunks.shape
    if n < PAD_ROWS:
        x = torch.cat([x, x.new_zeros((PAD_ROWS - n, x.shape[1]))])
    xc = x.view(x.shape[0], c, width).transpose(0, 1).contiguous()
    return torch.bmm(xc, w_chunks)[:, :n]


def reduce_chunks(partials: list[torch.Tensor]) -> torch.Tensor:
    """The all-reduce: concatenate every rank's chunk partials (rank order = chunk order) and sum them."""
    return torch.cat(partials, dim=0).sum(dim=0)


def mlp_chunks(cfg: ModelConfig) -> int:
    """Number of reduction chunks of the MLP (every valid TP size divides it)."""
    import math

    return math.gcd(cfg.intermediate_size, cfg.num_attention_heads)


def rms_norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(cfg: ModelConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """cos/sin tables `[max_position_embeddings, head_dim/2]` (computed in float64, stored float32)."""
    half = cfg.head_dim // 2
    inv = 1.0 / (cfg.rope_theta ** (torch.arange(half, dtype=torch.float64) * 2 / cfg.head_dim))
    ang = torch.arange(cfg.max_position_embeddings, dtype=torch.float64)[:, None] * inv[None, :]
    return ang.cos().float(), ang.sin().float()


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate-half RoPE on `[T, heads, head_dim]` with per-row cos/sin `[T, head_dim/2]`."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return torch.cat([x1 * c - x2 * s, x2 * c + x1 * s], dim=-1)


@dataclass(frozen=True)
class HeadShard:
    """Which heads and MLP slice a rank owns."""

    q_start: int
    q_heads: int
    kv_start: int
    kv_heads: int
    inter_start: int
    inter_size: int


def head_shard(cfg: ModelConfig, tp: int, rank: int) -> HeadShard:
    """Rank RANK's heads: contiguous KV heads, or one replicated KV head when tp > num_key_value_heads."""
    h, q = cfg.num_key_value_heads, cfg.num_attention_heads
    if tp <= h:
        kv_heads, kv_start = h // tp, rank * (h // tp)
    else:
        kv_heads, kv_start = 1, rank // (tp // h)
    q_heads = q // tp
    inter = cfg.intermediate_size // tp
    return HeadShard(rank * q_heads, q_heads, kv_start, kv_heads, rank * inter, inter)


@dataclass
class LayerShard:
    """One layer's weights on one rank (linear weights are [out, in], HF convention)."""

    input_norm: torch.Tensor
    post_norm: torch.Tensor
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    o: torch.Tensor  # [q_heads, head_dim, hidden]: one reduction chunk per query head
    gate: torch.Tensor
    up: torch.Tensor
    down: torch.Tensor  # [chunks, chunk_width, hidden]


def shard_layers(cfg: ModelConfig, tensors: dict[str, torch.Tensor], shard: HeadShard) -> list[LayerShard]:
    """Cut every layer's weights down to SHARD (contiguous copies: each rank owns its memory)."""
    d = cfg.head_dim
    qs, qe = shard.q_start * d, (shard.q_start + shard.q_heads) * d
    ks, ke = shard.kv_start * d, (shard.kv_start + shard.kv_heads) * d
    is_, ie = shard.inter_start, shard.inter_start + shard.inter_size
    n_chunks = mlp_chunks(cfg) * shard.inter_size // cfg.intermediate_size
    out = []
    for i in range(cfg.num_hidden_layers):
        p = f"model.layers.{i}."

        def t(name: str, p: str = p) -> torch.Tensor:
            return tensors[p + name]

        out.append(
            LayerShard(
                input_norm=t("input_layernorm.weight").contiguous(),
                post_norm=t("post_attention_layernorm.weight").contiguous(),
                q=t("self_attn.q_proj.weight")[qs:qe].contiguous(),
                k=t("self_attn.k_proj.weight")[ks:ke].contiguous(),
                v=t("self_attn.v_proj.weight")[ks:ke].contiguous(),
                o=t("self_attn.o_proj.weight")[:, qs:qe].T.reshape(shard.q_heads, d, -1).contiguous(),
                gate=t("mlp.gate_proj.weight")[is_:ie].contiguous(),
                up=t("mlp.up_proj.weight")[is_:ie].contiguous(),
                down=t("mlp.down_proj.weight")[:, is_:ie].T.reshape(n_chunks, shard.inter_size // n_chunks, -1).contiguous(),
            )
        )
    return out


def attend(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    q_pos: torch.Tensor,
    k_pos: torch.Tensor,
    window: int | None,
) -> torch.Tensor:
    """Causal (optionally sliding-window) attention of q `[heads, Tq, d]` over k/v `[heads, S, d]`.

    A key at position p is visible to a query at position t when p <= t and, for sliding layers,
    t - p < window (HF's convention: the window includes the query itself).
    """
    scores = torch.matmul(q, k.transpose(1, 2)) * (q.shape[-1] ** -0.5)
    allowed = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        allowed &= (q_pos[:, None] - k_pos[None, :]) < window
    scores = scores.masked_fill(~allowed[None], float("-inf"))
    return torch.matmul(torch.softmax(scores, dim=-1), v)
