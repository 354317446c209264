"""Between the HTTP event loop and the engine thread: submit requests, then await their end or their tokens.

Why a module: the engine thread calls `on_progress` / `on_done` from its own thread; this turns those calls
into events on the asyncio loop (loop.call_soon_threadsafe), bounds every wait, and aborts what a client
leaves behind (a closed stream frees the request's KV pages instead of decoding for nobody).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from pdctl.reference.request import GenRequest

REQUEST_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class TokenEvent:
    """Request `index` of a call has `tokens` output tokens now; `done` once it finished (or failed)."""

    index: int
    tokens: int
    done: bool


class EngineCall:
    """REQS submitted to ENGINE's scheduler; `wait()` for all of them, or iterate `events()` (streaming)."""

    def __init__(self, engine: Any, reqs: list[GenRequest], *, stream: bool = False) -> None:
        self.engine, self.reqs = engine, reqs
        loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[TokenEvent] = asyncio.Queue()
        self._deadline = time.monotonic() + REQUEST_TIMEOUT_S
        for i, req in enumerate(reqs):
            req.on_done = lambda r, i=i: loop.call_soon_threadsafe(
                self._events.put_nowait, TokenEvent(i, len(r.output_ids), True))
            if stream:
                req.on_progress = lambda r, i=i: loop.call_soon_threadsafe(
                    self._events.put_nowait, TokenEvent(i, len(r.output_ids), False))
        for req in reqs:
            engine.scheduler.submit(req)

    async def events(self) -> AsyncIterator[TokenEvent]:
        """Token events until every request is done; TimeoutError (after aborting them) past the deadline."""
        pending = len(self.reqs)
        while pending:
            left = self._deadline - time.monotonic()
            try:
                event = await asyncio.wait_for(self._events.get(), timeout=max(0.0, left))
            except TimeoutError:
                self.abort(f"request did not finish within {REQUEST_TIMEOUT_S:.0f} s")
                raise
            pending -= event.done
            yield event

    async def wait(self) -> list[GenRequest]:
        """Every request, finished (bounded by the request timeout)."""
        async for _ in self.events():
            pass
        return self.reqs

    def abort(self, message: str = "request aborted: the client went away") -> None:
        """Abort the requests that have not finished (their pages are freed on the engine thread)."""
        for req in self.reqs:
            if req.state != "finished":
                self.engine.scheduler.abort(req, message)
