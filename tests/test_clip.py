"""pdctl.clip: one-line messages cut between words, never inside one (issue 20: "(all circuits op")."""

from __future__ import annotations

from pdctl.clip import clip


def test_clip_never_cuts_a_word() -> None:
    text = "HTTP 503: No available servers: No available prefill workers (all circuits open or unhealthy)"
    assert clip(text, 60) == "HTTP 503: No available servers: No available prefill …"
    assert clip(text, 500) == text and len(clip("x" * 90, 40)) == 40
