"""What a reference server holds right now, for /metrics' gauges (pdctl.metrics.engine.Load).

Queue lengths are read live from any thread (len() of the scheduler's lists). KV pool usage needs the prefix
cache, which only the engine thread may walk: that thread re-measures the pools at most every PUBLISH_S
seconds (`tick`, after each loop turn), and scrapes read the last measure — a cheap, slightly stale view,
as SGLang's own gauges are (they are set at its logging intervals).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from pdctl.metrics.engine import Load

PUBLISH_S = 0.25


@dataclass(frozen=True)
class _Pool:
    capacity: int  # tokens that can ever be allocated
    available: int  # free
    evictable: int  # held only by the prefix cache

    @property
    def used(self) -> int:
        return self.capacity - self.available - self.evictable


class LoadBook:
    """The scheduler's load, for scrapes: `tick()` on the engine thread, `load()` from any thread."""

    def __init__(self, scheduler: Any) -> None:
        self.s = scheduler
        self._at = 0.0
        self._pools = self._measure()

    def tick(self) -> None:
        """Engine thread: re-measure the pools when the last measure is older than PUBLISH_S."""
        now = time.monotonic()
        if now - self._at >= PUBLISH_S:
            self._pools = self._measure()
            self._at = now

    def _measure(self) -> tuple[_Pool, _Pool | None]:
        kv, cache, ps = self.s.kv, self.s.cache, self.s.ps
        full_ev, swa_ev = cache.evictable_pages() if cache is not None else (0, 0)
        full = _Pool(kv.full_alloc.usable_pages * ps, kv.full_alloc.free_pages * ps, full_ev * ps)
        swa = None
        if kv.swa_alloc is not None:
            swa = _Pool(kv.swa_alloc.usable_pages * ps, kv.swa_alloc.free_pages * ps, swa_ev * ps)
        return full, swa

    def load(self) -> Load:
        """Any thread: live queue lengths and the last pool measure."""
        s = self.s
        full, swa = self._pools
        chunked = 1 if s._chunked is not None and s._chunked not in s._running else 0
        return Load(
            running=len(s._running) + chunked,
            queued=len(s._waiting),
            transferring=len(s._transferring),
            full_capacity=full.capacity,
            full_used=full.used,
            full_available=full.available,
            full_evictable=full.evictable,
            swa_capacity=swa.capacity if swa else None,
            swa_used=swa.used if swa else None,
            swa_available=swa.available if swa else None,
            swa_evictable=swa.evictable if swa else None,
            new_token_ratio=float(s.ratio.current),
        )
