"""Position-resolved report: where along the sequence the divergence starts, and where that lies relative to
the sliding window.

Why: a KV fault is usually tied to a place — page N, the first chunk boundary, the SWA window's pages, an
index that overflows at position 256 — and the place names the bug (sglang#25790 found FP8 KV diverging
from absolute position 97, the decode kernel's tile edge). Every scored position has its absolute sequence
position (prompt length + output index), so the report can say:

- per band of sequence positions (edges at the sliding window W and its doublings 2W, 4W, ..., or at powers
  of two without a window), the candidate's mean capped KL next to the floor's, and whether it is beyond
  `factor` x the floor there;
- the onset: the first sequence position, in a comparison that failed, whose KL exceeds the floor's 99th
  percentile position, and the prompt lengths around it (the longest prompt that stayed clean below the
  shortest that diverged);
- where the onset lies: within the first window (sliding and full-attention layers attend to the same
  positions), or past it (at decode position p sliding layers attend only to [p - W, p), full layers to
  all of it); whether prompts that fit in one window diverge too (not specific to the sliding-window pages)
  or only longer ones (the sliding-window pool and its page bookkeeping are the suspects);
- coverage: the longest sequence position the suite reached (nothing beyond it was tested).
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

from pdctl.parity.compare import KL_CAP, Comparison
from pdctl.parity.divergence import quantile
from pdctl.parity.results import ModeResult


def band_edges(limit: int, window: int | None) -> list[int]:
    """Band edges 0 < W < 2W < 4W ... (or 64, 128, ... without a window) up to past LIMIT."""
    step = window or 64
    edges = [0, step]
    while edges[-1] <= limit:
        edges.append(edges[-1] * 2)
    return edges


def _capped(comps: list[Comparison]) -> list[tuple[int, float, bool]]:
    return [(p.sequence_position, min(p.kl, KL_CAP), p.flip) for c in comps if not c.hard_failure for p in c.positions]


def bands(mode: ModeResult, edges: list[int], factor: float) -> list[dict[str, Any]]:
    """Per band of sequence positions: the candidate's and the floor's mean capped KL, flips, verdict."""
    cand = _capped(mode.comparisons)
    floor = _capped(mode.control or [])
    out = []
    for lo, hi in pairwise(edges):
        c = [(kl, flip) for pos, kl, flip in cand if lo <= pos < hi]
        f = [(kl, flip) for pos, kl, flip in floor if lo <= pos < hi]
        if not c:
            continue
        c_mean = sum(k for k, _ in c) / len(c)
        f_mean = sum(k for k, _ in f) / len(f) if f else None
        out.append({"from": lo, "to": hi, "positions": len(c), "mean_kl": c_mean, "flips": sum(x for _, x in c),
                    "floor_mean_kl": f_mean, "floor_positions": len(f),
                    "beyond_floor": f_mean is not None and c_mean > factor * f_mean and c_mean > 0})
    return out


def onset(comps: list[Comparison], floor: list[Comparison]) -> tuple[int | None, list[dict[str, Any]]]:
    """The first diverging sequence position over the failed comparisons COMPS, and each one's onset."""
    level = quantile([min(p.kl, KL_CAP) for c in floor if not c.hard_failure for p in c.positions], 0.99)
    each = []
    for c in comps:
        over = [p for p in c.positions if min(p.kl, KL_CAP) > level]
        first = over[0] if over else next((p for p in c.positions if p.flip), None)
        pos = first.sequence_position if first is not None else c.prompt_tokens
        each.append({"prompt": c.prompt_name, "label": c.label, "prompt_tokens": c.prompt_tokens,
                     "first_divergent_position": pos})
    return (min((e["first_divergent_position"] for e in each), default=None), each)


def where(position: int, window: int | None) -> str:
    """Where POSITION lies relative to the sliding window, in words."""
    if not window:
        return "the model has no sliding window: every layer attends to every earlier position"
    if position < window:
        return (f"within the first sliding window (position {position} < W={window}): sliding-window and "
                "full-attention layers attend to the same positions there")
    return (f"past the first sliding window (window {position // window + 1} of W={window}): at a decode position "
            f"p sliding-window layers attend only to [p - {window}, p), full-attention layers to every position")


def layer_window(everything: list[Comparison], bad_lengths: set[int], window: int, clean_below: int | None,
                 first: int) -> str | None:
    """Which layer type's window the onset points at, from which prompt lengths diverge (None: cannot say)."""
    fits = [c for c in everything if c.prompt_tokens <= window]
    if any(c.prompt_tokens in bad_lengths for c in fits):
        return ("prompts that fit in one sliding window diverge too: not specific to the sliding-window pages "
                "(full-attention KV, or every layer)")
    if clean_below is not None and clean_below > window:
        return (f"prompts past the window (up to {clean_below} tokens) stay clean: the onset is tied to a sequence "
                f"position (up to {first}), not to the sliding window's edge")
    if fits:
        return (f"every prompt within the window (W={window}) is clean and the first prompts past it diverge: the "
                "sliding-window KV (its pool, its pages past the window) is the first suspect")
    return None


def analyze(modes: dict[str, ModeResult], *, window: int | None, factor: float, max_new_tokens: int) -> dict[str, Any]:
    """The position-resolved report of a run (the `positions` key of the JSON)."""
    everything = [c for m in modes.values() for c in m.comparisons]
    covered = max((c.prompt_tokens for c in everything), default=0) + max_new_tokens
    edges = band_edges(covered, window)
    doc: dict[str, Any] = {"window": window, "covered_up_to": covered,
                           "bands": {name: bands(m, edges, factor) for name, m in modes.items()}}
    failed = [c for m in modes.values() for c in m.unexplained]
    floors = [c for m in modes.values() for c in (m.control or [])]
    first, each = onset(failed, floors)
    doc["onset"] = each
    doc["first_divergent_position"] = first
    if first is None:
        doc["summary"] = f"no divergence beyond the floor at any position up to {covered}"
        return doc
    bad_lengths = {c.prompt_tokens for c in failed}
    shortest_bad = min(bad_lengths)
    clean_below = [c.prompt_tokens for c in everything if c.prompt_tokens < shortest_bad and c.prompt_tokens not in bad_lengths]
    doc["shortest_diverging_prompt"] = shortest_bad
    doc["longest_clean_prompt_below"] = max(clean_below, default=None)
    doc["where"] = where(first, window)
    if window:
        doc["layer_window"] = layer_window(everything, bad_lengths, window, doc["longest_clean_prompt_below"], first)
    doc["summary"] = (f"divergence starts at sequence position {first}"
                      + (f" (prompts up to {doc['longest_clean_prompt_below']} tokens stay clean)"
                         if doc["longest_clean_prompt_below"] else "")
                      + f"; {doc['where']}")
    return doc
