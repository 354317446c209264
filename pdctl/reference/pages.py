"""Page accounting of one engine: growing and releasing a request's pages, sliding the window, admission room.

Kept apart from the scheduler because it is the one place that decides how many pages a request holds and
may still need; the scheduler only says when. Runs on the engine thread only (like the scheduler), so the
allocators' own lock is the only locking needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from pdctl.reference.kvcache import KVCache, KVCacheOOM, PageAllocator, SeqPages
from pdctl.reference.prefix_cache import PrefixCache
from pdctl.reference.request import GenRequest


def pages_for(tokens: int, page_size: int) -> int:
    """Pages needed to hold TOKENS positions (ceiling division)."""
    return -(-tokens // page_size)


class PageBook:
    """A request's page life cycle over the full and (hybrid SWA) sliding pools, evicting the prefix cache
    under pressure."""

    def __init__(self, kv: KVCache, cache: PrefixCache | None, sliding_window: int | None) -> None:
        self.kv, self.cache = kv, cache
        self.ps = kv.page_size
        # Sliding layers only get their own pool (and a window to trim) with hybrid SWA memory on.
        self.window = sliding_window if kv.swa_alloc is not None else None

    def _alloc(self, alloc: PageAllocator, n: int) -> list[int]:
        try:
            return alloc.alloc(n)
        except KVCacheOOM:
            if self.cache is None or self.cache.evict() == 0:
                raise
            return alloc.alloc(n)

    def grow(self, seq: SeqPages, upto_tokens: int, swa_from_page: int) -> None:
        """Allocate pages so SEQ covers positions < UPTO_TOKENS (SWA pages only from SWA_FROM_PAGE).

        Raises KVCacheOOM when the pools (after evicting the prefix cache) cannot supply them."""
        need = pages_for(upto_tokens, self.ps)
        if need > len(seq.full):
            seq.full.extend(self._alloc(self.kv.full_alloc, need - len(seq.full)))
        if self.kv.swa_alloc is not None and need > len(seq.swa):
            seq.swa.extend([-1] * max(0, swa_from_page - len(seq.swa)))
            seq.swa.extend(self._alloc(self.kv.swa_alloc, need - len(seq.swa)))

    def release(self, seq: SeqPages | None) -> None:
        """Give back every page SEQ holds (shared prefix pages only lose this holder)."""
        if seq is None:
            return
        self.kv.full_alloc.release(seq.full)
        if self.kv.swa_alloc is not None:
            self.kv.swa_alloc.release([p for p in seq.swa if p >= 0])
        seq.full, seq.swa = [], []

    def slide_window(self, seq: SeqPages, seq_len: int) -> None:
        """Release SWA pages no future query can see (keep pages overlapping [seq_len - window, seq_len))."""
        if self.window is None:
            return
        assert self.kv.swa_alloc is not None
        first = max(0, seq_len - self.window) // self.ps
        for i in range(min(first, len(seq.swa))):
            if seq.swa[i] >= 0:
                self.kv.swa_alloc.release([seq.swa[i]])
                seq.swa[i] = -1

    def final_pages(self, req: GenRequest, prefill_role: bool, ratio: float = 1.0) -> int:
        """Full-pool pages REQ is expected to hold: prefill servers hand requests off after the prompt; others
        count RATIO (SGLang's new_token_ratio) of the output tokens still to come."""
        if prefill_role:
            return pages_for(req.prompt_len, self.ps)
        done = len(req.output_ids)
        left = max(0, req.sampling.max_new_tokens - done)
        return pages_for(req.prompt_len + done + math.ceil(ratio * left), self.ps)

    def fits(
        self, req: GenRequest, matched_pages: int, admitted: Sequence[GenRequest], prefill_role: bool,
        ratio: float = 1.0,
    ) -> bool:
        """Admission control, SGLang's way: REQ's expected pages fit beside what ADMITTED requests are expected
        to grow into (RATIO of their remaining max_new_tokens). The estimate is optimistic: when running
        requests outgrow it the scheduler retracts some (decode_fits)."""
        reserved = sum(
            max(0, self.final_pages(r, prefill_role, ratio) - len(r.seq.full)) for r in admitted if r.seq is not None
        )
        if self.kv.full_alloc.free_pages - reserved < self.final_pages(req, prefill_role, ratio) - matched_pages:
            return False
        if self.kv.swa_alloc is not None:
            swa_need = pages_for(req.prompt_len, self.ps) - matched_pages + 1
            if self.kv.swa_alloc.free_pages - len(admitted) < swa_need:
                return False
        return True

    def decode_need(self, reqs: Sequence[GenRequest]) -> tuple[int, int]:
        """(full, SWA) pages the next decode step of REQS allocates (a request crossing into a new page)."""
        full = swa = 0
        for r in reqs:
            if r.seq is None:
                continue
            need = pages_for(r.seq_len + 1, self.ps)
            full += need > len(r.seq.full)
            swa += self.kv.swa_alloc is not None and need > len(r.seq.swa)
        return full, swa

    def decode_fits(self, reqs: Sequence[GenRequest]) -> bool:
        """Whether the next decode step of REQS finds its pages (evicting the prefix cache if that helps)."""
        full, swa = self.decode_need(reqs)

        def ok() -> bool:
            swa_free = self.kv.swa_alloc.free_pages if self.kv.swa_alloc is not None else 0
            return self.kv.full_alloc.free_pages >= full and swa_free >= swa

        if ok():
            return True
        return self.cache is not None and self.cache.evict() > 0 and ok()
