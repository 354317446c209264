"""Shortening text for one-line messages without cutting a word in two.

A server's error body quoted in a failure ("HTTP 503: No available servers: ... (all circuits op") must stay
readable and searchable: it is cut at the last word boundary before the limit, and the cut is marked.
"""

from __future__ import annotations

MARK = " …"


def clip(text: str, limit: int) -> str:
    """TEXT on one line (whitespace runs collapsed), at most LIMIT characters, cut between words with MARK
    when it was longer; a single word longer than LIMIT is cut inside (nothing else fits)."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    room = max(1, limit - len(MARK))
    head = flat[:room + 1]
    cut = head.rfind(" ")
    return (flat[:cut] if cut > 0 else flat[:room]).rstrip(" ,;:") + MARK
