"""Sampling parameters, token choice (greedy or seeded temperature/top-p/top-k) and stop conditions.

Logprobs are always those of the model's raw distribution (log_softmax of the logits), whatever the
temperature, so greedy and sampled requests report comparable numbers (SGLang's default).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch


@dataclass
class SamplingParams:
    """SGLang `sampling_params` fields the reference engine honours."""

    max_new_tokens: int = 128
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = -1
    stop: list[str] = field(default_factory=list)
    stop_token_ids: list[int] = field(default_factory=list)
    ignore_eos: bool = False
    seed: int | None = None

    @property
    def greedy(self) -> bool:
        """Temperature 0 (or top_k 1) means argmax, deterministic."""
        return self.temperature < 1e-6 or self.top_k == 1


def choose(logits: torch.Tensor, params: SamplingParams, gen: torch.Generator | None) -> int:
    """The next token from one row of logits: argmax when greedy, else a draw with GEN (seeded)."""
    if params.greedy or gen is None:
        return int(torch.argmax(logits))
    scaled = logits / params.temperature
    if params.top_k > 0:
        kth = torch.topk(scaled, min(params.top_k, scaled.shape[-1])).values[-1]
        scaled = scaled.masked_fill(scaled < kth, float("-inf"))
    probs = torch.softmax(scaled, dim=-1)
    if params.top_p < 1.0:
        sorted_p, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(sorted_p, 0) - sorted_p < params.top_p
        mask = torch.zeros_like(probs, dtype=torch.bool)
        mask[order[keep]] = True
        probs = torch.where(mask, probs, torch.zeros_like(probs))
        probs = probs / probs.sum()
    return int(torch.multinomial(probs, 1, generator=gen))


def top_logprobs(logprobs: torch.Tensor, k: int) -> list[tuple[float, int]]:
    """The K best (logprob, token id) of one row, best first (ties: lower id first)."""
    if k <= 0:
        return []
    vals, idx = torch.topk(logprobs, min(k, logprobs.shape[-1]))
    return [(float(v), int(i)) for v, i in zip(vals.tolist(), idx.tolist())]


def stop_match(text: str, stops: list[str]) -> tuple[str, int] | None:
    """(stop string, index in TEXT) of the earliest stop string found, or None."""
    best: tuple[str, int] | None = None
    for s in stops:
        if not s:
            continue
        i = text.find(s)
        if i >= 0 and (best is None or i < best[1]):
            best = (s, i)
    return best


def finish_reason(kind: str, **extra: Any) -> dict[str, Any]:
    """SGLang's finish_reason object: {"type": "length"|"stop"|"abort", ...}."""
    return {"type": kind, **extra}
