"""How the engine's arithmetic rounds and orders its sums: `exact` (default) or `gpu-like` (`--numerics`).

Why two modes: parity's method (a tolerance, the control noise floor, attributing a difference to prefill) is
only meaningful against an engine that differs from itself the way GPU servers do; the exact mode is what
proves the transfer (PD equals colocated bit for bit), the gpu-like mode is what tests the method.

- `exact`: float32 everywhere, row-padded GEMMs and a TP all-reduce over fixed per-head/per-slice chunks in
  global order (pdctl.reference.model), so the result does not depend on TP, batch, chunking or cache state.
- `gpu-like`: what bf16 GPU kernels do to the same model — weights, activations, the residual stream and the
  KV cache are stored as bf16 (values rounded to bf16, kept in float32 tensors so pool memory and transfers
  are unchanged); GEMMs split their reduction dimension into a number of parts that depends on the step's
  row count (split-K GEMMs pick their split by problem shape), attention splits its keys into blocks merged
  with running max/sum rescaling (flash-decoding's split-KV) likewise, and each TP rank's row-parallel output
  is rounded before the all-reduce sums the ranks. So results depend on batch size, on chunk boundaries (a
  chunk is a step's rows) and on TP — and on nothing else: the split choices come from a seeded hash of
  the shape, so a run is reproducible bit for bit. It does not model: fused kernels' exact reduction trees,
  tensor-core fp32-accumulate rounding inside one dot product, bf16 logits (logits stay float32, as SGLang's
  logits processor computes them), non-deterministic atomics, FP8/MXFP8 KV, or speed.
"""

from __future__ import annotations

import random
from itertools import pairwise
from typing import Protocol

import torch

from pdctl.reference import model as exact
from pdctl.reference.args import NUMERICS

_SPLITS = (1, 2, 3, 4, 6, 8)  # split-K / split-KV part counts a shape may map to


class Numerics(Protocol):
    """The arithmetic TPModel.forward runs with (one instance per engine; `begin_step` once per forward)."""

    name: str

    def begin_step(self, rows: int) -> None:
        """A forward over ROWS token rows starts: shape-dependent choices (splits) are made here."""

    def weight(self, w: torch.Tensor) -> torch.Tensor:
        """A weight as this mode stores it."""

    def act(self, x: torch.Tensor) -> torch.Tensor:
        """An activation / residual / KV value as this mode stores it."""

    def linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """x @ w.T."""

    def row_parallel(self, x: torch.Tensor, w_chunks: torch.Tensor) -> torch.Tensor:
        """One rank's partial of a row-parallel GEMM, as the `[parts, n, out]` the all-reduce sums."""

    def all_reduce(self, partials: list[torch.Tensor]) -> torch.Tensor:
        """Sum the ranks' partials (rank order)."""

    def logits(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        """The lm_head GEMM (float32 logits in both modes)."""

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor,
               k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
        """Causal (sliding-window) attention."""


class ExactNumerics:
    """float32, batch/TP/chunk-invariant (pdctl.reference.model's functions)."""

    name = "exact"

    def begin_step(self, rows: int) -> None:
        """Nothing depends on the shape."""

    def weight(self, w: torch.Tensor) -> torch.Tensor:
        return w

    def act(self, x: torch.Tensor) -> torch.Tensor:
        return x

    def linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return exact.linear(x, w)

    def row_parallel(self, x: torch.Tensor, w_chunks: torch.Tensor) -> torch.Tensor:
        return exact.chunked_linear(x, w_chunks)

    def all_reduce(self, partials: list[torch.Tensor]) -> torch.Tensor:
        return exact.reduce_chunks(partials)

    def logits(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return exact.linear(x, w)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor,
               k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
        return exact.attend(q, k, v, q_pos, k_pos, window)


def bf16(x: torch.Tensor) -> torch.Tensor:
    """X rounded to bfloat16 (round to nearest even), kept as float32."""
    return x.to(torch.bfloat16).to(torch.float32)


def _split_sum(x: torch.Tensor, w: torch.Tensor, parts: int) -> torch.Tensor:
    """x @ w.T with the reduction dimension cut into PARTS contiguous slices summed in order (split-K)."""
    k = x.shape[-1]
    parts = max(1, min(parts, k))
    out = None
    for a, b in pairwise([k * i // parts for i in range(parts + 1)]):
        part = x[:, a:b] @ w[:, a:b].T
        out = part if out is None else out + part
    assert out is not None
    return out


class GpuLikeNumerics:
    """bf16 storage and shape-dependent reduction orders, seeded (see the module docstring)."""

    name = "gpu-like"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.gemm_parts = 1
        self.kv_parts = 1

    def _choose(self, salt: int, rows: int) -> int:
        return random.Random(self.seed * 1_000_003 + salt * 7919 + rows).choice(_SPLITS)

    def begin_step(self, rows: int) -> None:
        self.gemm_parts = self._choose(1, rows)
        self.kv_parts = self._choose(2, rows)

    def weight(self, w: torch.Tensor) -> torch.Tensor:
        return bf16(w)

    def act(self, x: torch.Tensor) -> torch.Tensor:
        return bf16(x)

    def linear(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return bf16(_split_sum(x, w, self.gemm_parts))

    def row_parallel(self, x: torch.Tensor, w_chunks: torch.Tensor) -> torch.Tensor:
        # the rank's chunks are one GEMM over its whole slice of the reduction dimension
        c, width, out = w_chunks.shape
        w = w_chunks.reshape(c * width, out).T
        return bf16(_split_sum(x, w, self.gemm_parts))[None]

    def logits(self, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return _split_sum(x, w, self.gemm_parts)

    def all_reduce(self, partials: list[torch.Tensor]) -> torch.Tensor:
        total = partials[0].sum(dim=0)
        for p in partials[1:]:
            total = total + p.sum(dim=0)
        return bf16(total)

    def attend(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, q_pos: torch.Tensor,
               k_pos: torch.Tensor, window: int | None) -> torch.Tensor:
        """Split-KV attention: per key block a local max, exp-sum and weighted sum, merged in block order."""
        scale = q.shape[-1] ** -0.5
        allowed = k_pos[None, :] <= q_pos[:, None]
        if window is not None:
            allowed &= (q_pos[:, None] - k_pos[None, :]) < window
        n_keys = k.shape[1]
        parts = max(1, min(self.kv_parts, n_keys))
        bounds = [n_keys * i // parts for i in range(parts + 1)]
        m = acc = den = None
        for a, b in pairwise(bounds):
            s = torch.matmul(q, k[:, a:b].transpose(1, 2)) * scale
            s = s.masked_fill(~allowed[None, :, a:b], float("-inf"))
            bm = s.amax(dim=-1, keepdim=True)
            if m is None:
                m = bm
                e = torch.exp(s - torch.where(torch.isinf(m), torch.zeros_like(m), m))
                den, acc = e.sum(-1, keepdim=True), torch.matmul(e, v[:, a:b])
                continue
            new = torch.maximum(m, bm)
            safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
            e = torch.exp(s - safe)
            alpha = torch.exp(m - safe)
            den = den * alpha + e.sum(-1, keepdim=True)
            acc = acc * alpha + torch.matmul(e, v[:, a:b])
            m = new
        assert acc is not None and den is not None
        return bf16(acc / den)


def make_numerics(name: str, seed: int = 0) -> Numerics:
    """The Numerics for --numerics NAME (ValueError on an unknown name: argparse rejects it first)."""
    if name == "exact":
        return ExactNumerics()
    if name == "gpu-like":
        return GpuLikeNumerics(seed)
    raise ValueError(f"unknown numerics {name!r}; expected one of {NUMERICS}")
