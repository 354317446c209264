"""Live alarms of `pdctl status --watch`: KV transfers that do not move (pure logic over the figures).

Two patterns turn into hangs in the field. Stuck rooms: requests sit in a role's transfer queue and never
complete (sglang PR #31800: Mooncake receivers left in Transferring, never timed out; `#transfer-req` frozen
while the KV cache is nearly empty), which a huge SGLANG_DISAGGREGATION_WAITING_TIMEOUT makes permanent.
And KV that does not arrive: the transfer queue grows while KV use stays flat. Each refresh adds one sample
per process; an alarm needs a span of at least STALL_AFTER seconds of samples that all show it, so one slow
transfer on a loaded machine does not raise it.

"Do not move" is read from completion counters where the server has them (pdctl's reference engine:
pdctl:kv_transfers_total, both roles). A real SGLang server exports none on decode: there the alarm needs
the transfer count unchanged and no request finished for the whole span (an approximation, said so in the
alarm).
"""

from __future__ import annotations

from collections import deque
from dataclasses import asdict, dataclass
from itertools import pairwise
from typing import Any

STALL_AFTER_S = 60.0
FLAT_KV = 0.01  # KV use moving less than this (share of the pool) over the span counts as flat
MIN_GROWTH = 2  # the transfer queue grew by at least this many requests


@dataclass(frozen=True)
class Sample:
    """What one refresh saw of one process."""

    at: float
    transferring: int | None
    kv_usage: float | None
    completed: float | None  # transfers completed (ok + failed) since start; None: not exported
    finished: float | None  # requests finished since start


@dataclass(frozen=True)
class Alarm:
    """One alarm of one process: `kind` stuck-transfers | kv-not-arriving."""

    process: str
    kind: str
    message: str
    span_s: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def sample_of(figures: dict[str, Any] | None, at: float) -> Sample | None:
    """The sample of an engine's figures (pdctl.metrics.figures.engine_figures); None for a router/no figures."""
    if not figures or figures.get("kind") != "engine":
        return None
    totals = figures.get("totals") or {}
    ok, failed = totals.get("transfers_ok"), totals.get("transfers_failed")
    completed = None if ok is None and failed is None else (ok or 0) + (failed or 0)
    return Sample(at, figures.get("transferring"), figures.get("kv_usage"), completed, totals.get("requests"))


def _span(history: list[Sample], window_s: float) -> list[Sample] | None:
    """The samples from the latest one at least WINDOW_S before the last, to the last (None: not enough yet)."""
    last = history[-1]
    anchors = [i for i, s in enumerate(history) if last.at - s.at >= window_s]
    return history[anchors[-1]:] if anchors else None


def stuck_transfers(history: list[Sample], window_s: float) -> str | None:
    """Requests in transfer for the whole span, and none of them moved: the alarm's text, else None."""
    span = _span(history, window_s)
    if span is None or any(s.transferring is None or s.transferring < 1 for s in span):
        return None
    first, last = span[0], span[-1]
    if first.completed is not None and last.completed is not None:
        if last.completed != first.completed:  # some transfer completed (or the counter restarted)
            return None
        return (f"{last.transferring} request(s) in KV transfer and none completed in {last.at - first.at:.0f} s "
                "(stuck rooms, sglang PR #31800): check the peer's log (`pdctl logs`) and the transfer timeouts")
    if len({s.transferring for s in span}) > 1 or first.finished is None or last.finished != first.finished:
        return None
    return (f"{last.transferring} request(s) in KV transfer, unchanged, and no request finished in "
            f"{last.at - first.at:.0f} s (this server exports no transfer counter: judged from the queue; stuck "
            "rooms, sglang PR #31800)")


def kv_not_arriving(history: list[Sample], window_s: float) -> str | None:
    """The transfer queue grew all span long while KV use stayed flat: KV is not arriving."""
    span = _span(history, window_s)
    if span is None or any(s.transferring is None or s.kv_usage is None for s in span):
        return None
    counts = [s.transferring or 0 for s in span]
    growing = all(b >= a for a, b in pairwise(counts)) and counts[-1] - counts[0] >= MIN_GROWTH
    kv = [s.kv_usage or 0.0 for s in span]
    if growing and max(kv) - min(kv) < FLAT_KV:
        return (f"transfer queue grew {counts[0]} -> {counts[-1]} in {span[-1].at - span[0].at:.0f} s while KV use "
                f"stayed at {100 * kv[-1]:.1f}%: KV is not arriving (check the transfer path and the peer)")
    return None


class StallDetector:
    """Keeps each process's recent samples and says which alarms hold now."""

    def __init__(self, stall_after: float = STALL_AFTER_S) -> None:
        self.stall_after = stall_after
        self._history: dict[str, deque[Sample]] = {}

    def update(self, name: str, figures: dict[str, Any] | None, at: float) -> list[Alarm]:
        """Add NAME's sample of this refresh; the alarms that hold for it (a gap in its figures restarts it)."""
        sample = sample_of(figures, at)
        if sample is None:
            self._history.pop(name, None)
            return []
        history = self._history.setdefault(name, deque())
        history.append(sample)
        while len(history) > 2 and history[-1].at - history[1].at >= self.stall_after:
            history.popleft()  # keep one sample older than the window: the span's anchor
        out = []
        samples = list(history)
        for kind, check in (("stuck-transfers", stuck_transfers), ("kv-not-arriving", kv_not_arriving)):
            text = check(samples, self.stall_after)
            if text is not None:
                out.append(Alarm(name, kind, text, round(samples[-1].at - samples[0].at, 1)))
        return out
