"""The engine thread: admits requests, runs batched model steps, samples, finishes requests.

HTTP handlers call `submit(req)` from any thread; everything else (pages, prefix cache, model steps, role
callbacks) happens on the one engine thread, so the KV cache needs no locking. Each step runs, SGLang's way:
one decode token of every running request (retracting some when their pages run out: pdctl.reference.
retraction), the next chunk of the prompt being prefilled in chunks, and new prefills, all within the
chunked-prefill budget (`--chunked-prefill-size` tokens of prefill per step; chunks end on page boundaries).
How many pages a request holds and may still need is `pages.PageBook`'s business; the PD hand-off is the
role's (pdctl.reference.roles); the scheduler decides when.
"""

from __future__ import annotations

import logging
import queue
import sys
import threading
import time
from collections import deque
from typing import Any

import torch

from pdctl.reference.chunks import chunk_end, collect_input_logprobs, prefill_segment
from pdctl.reference.handoff import PDHandoff
from pdctl.reference.kvcache import KVCache, KVCacheOOM, SeqPages
from pdctl.reference.load import LoadBook
from pdctl.reference.pages import PageBook
from pdctl.reference.prefix_cache import PrefixCache
from pdctl.reference.ranks import Segment, TPModel
from pdctl.reference.request import GenRequest
from pdctl.reference.retraction import LAST_REQUEST_OOM, NewTokenRatio, retraction_victim
from pdctl.reference.roles.base import FirstToken, Role
from pdctl.reference.sampling import choose, finish_reason, stop_match, top_logprobs
from pdctl.reference.tokenizer import ByteTokenizer

log = logging.getLogger("pdctl.reference.scheduler")
Work = list[tuple[GenRequest, Segment]]


class Scheduler(PDHandoff):
    """Owns the model, KV cache, prefix cache and role; runs them on a dedicated thread."""

    def __init__(
        self,
        model: TPModel,
        kv: KVCache,
        role: Role,
        *,
        radix_cache: bool,
        random_seed: int = 0,
        chunked_prefill_size: int = 4096,
        schedule_conservativeness: float = 1.0,
        metrics: Any,
    ) -> None:
        self.model, self.kv, self.role = model, kv, role
        self.cfg = model.cfg
        self.ps = kv.page_size
        self.cache = PrefixCache(kv, self.cfg.sliding_window) if radix_cache else None
        self.pages = PageBook(kv, self.cache, self.cfg.sliding_window)
        self.window = self.pages.window
        self.tok = ByteTokenizer()
        self.random_seed = random_seed
        self.chunk_size = chunked_prefill_size if chunked_prefill_size > 0 else sys.maxsize
        self.ratio = NewTokenRatio.from_conservativeness(schedule_conservativeness)
        self._inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._waiting: deque[GenRequest] = deque()
        self._running: list[GenRequest] = []
        self._chunked: GenRequest | None = None  # a prompt being prefilled chunk by chunk across steps
        self._transferring: dict[int, GenRequest] = {}  # id(req) -> req, while a role moves its KV
        self._step_reqs: list[GenRequest] = []  # requests the current step touches (failed if it raises)
        self._stop = threading.Event()
        self._counter = 0
        self._rooms: dict[int, int] = {}  # bootstrap_room -> live requests using it (read by the role)
        self._rooms_lock = threading.Lock()
        self.steps = 0
        self.retracted = 0  # requests retracted so far (re-queued under memory pressure)
        self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)
        self.metrics = metrics  # pdctl.metrics.engine.EngineMetrics: /metrics' counters (cheap hooks)
        self.load_book = LoadBook(self)  # /metrics' gauges

    # ---- public, thread-safe -------------------------------------------------------------------------
    def start(self) -> None:
        """Start the engine thread."""
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the engine thread; unfinished requests get an abort error."""
        self._stop.set()
        self._inbox.put(("wake",))
        self._thread.join(timeout)

    def submit(self, req: GenRequest) -> None:
        """Queue REQ; its `on_done` is called from the engine thread when it finishes."""
        if req.bootstrap_room is not None:
            with self._rooms_lock:
                self._rooms[int(req.bootstrap_room)] = self._rooms.get(int(req.bootstrap_room), 0) + 1
        self._inbox.put(("new", req))

    def abort(self, req: GenRequest, message: str = "request aborted: the client went away") -> None:
        """Stop REQ (any thread): it finishes with MESSAGE and its pages are freed on the engine thread; a
        request whose KV a role is moving finishes when the role is done with its pages."""
        self._inbox.put(("abort", req, message))

    def live_rooms(self) -> set[int]:
        """Bootstrap rooms of the requests this server holds (queued, prefilling, transferring or decoding):
        what a PD peer's liveness probe asks about, so a slow server is told apart from one that lost them."""
        with self._rooms_lock:
            return set(self._rooms)

    def flush_cache(self, timeout: float = 30.0) -> int:
        """Empty the prefix cache (on the engine thread); returns pages dropped."""
        box: queue.Queue[int] = queue.Queue()
        self._inbox.put(("flush", box))
        return box.get(timeout=timeout)

    def stats(self) -> dict[str, Any]:
        """Load numbers for /server_info (read without locking: approximate by nature)."""
        return {
            "num_running_reqs": len(self._running),
            "num_waiting_reqs": len(self._waiting),
            "num_transferring_reqs": len(self._transferring),
            "num_retracted_reqs": self.retracted,
            "new_token_ratio": round(self.ratio.current, 4),
            "full_free_pages": self.kv.full_alloc.free_pages,
            "swa_free_pages": self.kv.swa_alloc.free_pages if self.kv.swa_alloc else None,
            "cached_pages": self.cache.cached_pages if self.cache else 0,
            "steps": self.steps,
        }

    # ---- engine thread -------------------------------------------------------------------------------
    def _loop(self) -> None:
        busy = False
        while not self._stop.is_set():
            self._drain(block=not busy)
            try:
                busy = self._step()
            except Exception as exc:  # never let one bad step kill the server, nor orphan its requests
                log.exception("engine step failed")
                for req in {id(r): r for r in [*self._step_reqs, *self._running]}.values():
                    self._finish(req, error=f"engine step failed: {exc}")
                busy = False
            self.load_book.tick()
        for req in [*self._running, *self._waiting, *self._transferring.values()]:
            self._finish(req, error="server shutting down")

    def _drain(self, block: bool) -> None:
        try:
            item = self._inbox.get(timeout=0.5) if block else self._inbox.get_nowait()
        except queue.Empty:
            return
        while True:
            self._handle(item)
            try:
                item = self._inbox.get_nowait()
            except queue.Empty:
                return

    def _handle(self, item: tuple[Any, ...]) -> None:
        kind = item[0]
        if kind == "new":
            req: GenRequest = item[1]
            self._counter += 1
            if not req.sampling.greedy:
                seed = req.sampling.seed if req.sampling.seed is not None else self.random_seed + self._counter
                req.generator = torch.Generator().manual_seed(int(seed))
            self._waiting.append(req)
        elif kind == "abort":
            req, message = item[1], item[2]
            if req.state == "transferring":
                req.abort_message = message
            elif req.state != "finished":
                self._finish(req, error=message, status=499)
        elif kind == "flush":
            item[1].put(self.cache.flush() if self.cache else 0)
        elif kind == "prefill_done":
            self._on_prefill_done(item[1], item[2])
        elif kind == "decode_ready":
            self._on_decode_ready(item[1], item[2])

    def _step(self) -> bool:
        """One model step; False when there was nothing to run (the loop then blocks on its inbox)."""
        self._step_reqs = []
        decodes = self._schedule_decodes()
        prefills = self._schedule_prefills()
        if not prefills and not decodes:
            if not self._running and self._chunked is None:
                self.ratio.reset()
            return False
        logits = self.model.forward([seg for _, seg in prefills] + [seg for _, seg in decodes])
        self.steps += 1
        for (req, seg), rows in zip(prefills, logits[: len(prefills)]):
            self._after_chunk(req, seg, rows)
        for (req, _), rows in zip(decodes, logits[len(prefills) :]):
            self._append(req, rows[-1])
        if decodes:
            self.ratio.decay_step()
        return True

    # ---- decode steps and retraction ----------------------------------------------------------------
    def _schedule_decodes(self) -> Work:
        """One token of every running request; retract requests first when their pages would run out."""
        retracted = False
        while self._running and not self.pages.decode_fits(self._running):
            if len(self._running) == 1:
                self._finish(self._running[0], error=LAST_REQUEST_OOM, status=500)
                break
            self._retract(retraction_victim(self._running))
            retracted = True
        if retracted:
            self.ratio.after_retract(self._running)
        work = []
        for req in list(self._running):
            assert req.seq is not None
            pos = req.seq_len
            self.pages.grow(req.seq, pos + 1, len(req.seq.swa))
            self._step_reqs.append(req)
            work.append((req, Segment(req.seq, [req.output_ids[-1]], pos, 0)))
        return work

    def _retract(self, req: GenRequest) -> None:
        """Give REQ's pages back and re-queue it first; its KV is recomputed when it is admitted again."""
        self._running.remove(req)
        self.pages.release(req.seq)
        req.seq, req.retracted, req.prefilled, req.state = None, True, 0, "waiting"
        self.retracted += 1
        self.metrics.retracted()
        self._waiting.appendleft(req)
        log.info("retracted %s after %d output tokens (KV pages ran out; %d free)", req.rid, len(req.output_ids),
                 self.kv.full_alloc.free_pages)

    # ---- prefill chunks and admission ---------------------------------------------------------------
    def _schedule_prefills(self) -> Work:
        """The chunked prompt's next chunk, then new requests while the chunked-prefill budget lasts."""
        budget, work = self.chunk_size, []
        chunk_open = False
        if self._chunked is not None:
            req = self._chunked
            end = chunk_end(req.prefilled, len(req.fill_ids), budget, self.ps, allow_chunk=True)
            assert end is not None and req.seq is not None
            work.append((req, prefill_segment(req, req.prefilled, end)))
            self._step_reqs.append(req)
            budget -= end - req.prefilled
            chunk_open = end < len(req.fill_ids)
        while self._waiting and budget > 0:
            req = self._waiting[0]
            try:
                admitted = self._admit(req, budget, allow_chunk=not chunk_open)
            except Exception as exc:  # a bug in admission fails this request, not the server (nor loops)
                log.exception("admitting %s failed", req.rid)
                self._finish(req, error=f"engine step failed: {exc}")
                continue
            if admitted is None:  # not now: no pages or no budget; retried next step
                break
            if self._waiting and self._waiting[0] is req:  # (_finish already removed a failed one)
                self._waiting.popleft()
            if admitted is False:
                continue
            work.append((req, admitted))
            self._step_reqs.append(req)
            budget -= len(admitted.tokens)
            chunk_open = chunk_open or admitted.end < len(req.fill_ids)
        return work

    def _admit(self, req: GenRequest, budget: int, *, allow_chunk: bool) -> Segment | None | bool:
        """Pages + prefix match for REQ: its first prefill Segment, None (not now), or False (handled here)."""
        decode_role = self.role.name == "decode" and not req.retracted
        fill = req.fill_ids
        max_prefix = len(fill) - 1
        if req.return_logprob and req.logprob_start_len >= 0 and not req.retracted:
            max_prefix = min(max_prefix, req.logprob_start_len)
        if decode_role:
            max_prefix = req.prompt_len
        match = self.cache.match(fill, max_prefix) if self.cache is not None else None
        if self._busy() and not self._fits(req, match.pages if match else 0):
            if self.cache is None or self.cache.evict() == 0:
                return None
            match = self.cache.match(fill, max_prefix)
            if not self._fits(req, match.pages):
                return None
        prefix = (match.pages if match else 0) * self.ps
        end = len(fill) if decode_role else chunk_end(prefix, len(fill), budget, self.ps, allow_chunk=allow_chunk)
        if end is None:
            return None
        seq = req.seq = SeqPages([], [])
        try:
            if match and match.pages:
                self.cache.hold(match)  # type: ignore[union-attr]
                seq.full, seq.swa = list(match.full), list(match.swa)
            swa_from = len(seq.full)
            if decode_role and self.window is not None:
                swa_from = max(prefix, req.prompt_len - self.window) // self.ps
            self.pages.grow(seq, len(fill), swa_from)
        except KVCacheOOM as exc:
            self.pages.release(seq)
            req.seq = None
            if self._busy():
                return None
            self._finish(req, error=str(exc), status=503)
            return False
        req.seq, req.prefilled = seq, prefix
        if not req.retracted:
            req.cached_tokens = prefix
            self.metrics.admitted(prefix, len(fill))
            if req.logprob_start < req.prompt_len:  # position `start` has no logprob (nothing precedes it)
                req.input_logprobs, req.input_top = [None], [None]
        if decode_role:
            self._hand_to_decode(req, swa_from if self.window is not None else 0)
            return False
        req.state = "prefilling"
        return prefill_segment(req, prefix, end)

    def _busy(self) -> bool:
        return bool(self._running or self._transferring or self._step_reqs or self._chunked)

    def _fits(self, req: GenRequest, matched_pages: int) -> bool:
        admitted = {id(r): r for r in [*self._running, *self._transferring.values(), *self._step_reqs]}
        if self._chunked is not None:
            admitted[id(self._chunked)] = self._chunked
        return self.pages.fits(req, matched_pages, list(admitted.values()),
                               prefill_role=self.role.name == "prefill", ratio=self.ratio.current)

    def _after_chunk(self, req: GenRequest, seg: Segment, rows: torch.Tensor) -> None:
        """Collect the chunk's input logprobs; a prompt not yet complete continues next step."""
        req.prefilled = seg.end
        if rows.shape[0] and not req.retracted:
            collect_input_logprobs(req, seg.start + seg.logits_from, rows)
        if seg.end < len(req.fill_ids):
            self._chunked = req
            assert req.seq is not None
            self.pages.slide_window(req.seq, seg.end)  # SWA pages no later chunk can see
            return
        if self._chunked is req:
            self._chunked = None
        if req.retracted:  # KV recomputed: resume decoding where it stopped
            req.retracted, req.state = False, "running"
            assert req.seq is not None
            self.pages.slide_window(req.seq, req.seq_len)
            self._running.append(req)
            return
        self._after_prefill(req, rows[-1])

    def _after_prefill(self, req: GenRequest, last_row: torch.Tensor) -> None:
        if self.cache is not None:
            self.cache.insert(req.input_ids, req.seq, req.prompt_len)  # type: ignore[arg-type]
        assert req.seq is not None
        self.pages.slide_window(req.seq, req.prompt_len)
        if self.role.name == "prefill":
            lp = torch.log_softmax(last_row, dim=-1)
            token = choose(last_row, req.sampling, req.generator)
            first = FirstToken(token, float(lp[token]), top_logprobs(lp, req.top_logprobs_num))
            self._record(req, first)
            self._hand_to_prefill_role(req, first)
            return
        req.state = "running"
        self._running.append(req)
        if req.sampling.max_new_tokens == 0:
            self._finish(req, reason=finish_reason("length", length=0))
            return
        self._append(req, last_row)

    # ---- tokens and finishing -----------------------------------------------------------------------
    def _record(self, req: GenRequest, first: FirstToken) -> None:
        req.output_ids.append(first.token_id)
        req.output_logprobs.append(first.logprob)
        req.output_top.append(list(first.top_logprobs))
        self.metrics.token(req, time.monotonic())

    def _append(self, req: GenRequest, logits: torch.Tensor) -> None:
        lp = torch.log_softmax(logits, dim=-1)
        token = choose(logits, req.sampling, req.generator)
        self._record(req, FirstToken(token, float(lp[token]), top_logprobs(lp, req.top_logprobs_num)))
        assert req.seq is not None
        self.pages.slide_window(req.seq, req.seq_len)
        self._check_finish(req)

    def _check_finish(self, req: GenRequest) -> None:
        sp, token = req.sampling, req.output_ids[-1]
        if not sp.ignore_eos and token == self.cfg.eos_token_id or token in sp.stop_token_ids:
            self._finish(req, reason=finish_reason("stop", matched=token))
        elif sp.stop and self._tail_has_stop(req):
            hit = stop_match(self.tok.decode(req.output_ids), sp.stop)
            assert hit is not None
            req.stop_text_index = hit[1]
            self._finish(req, reason=finish_reason("stop", matched=hit[0]))
        elif len(req.output_ids) >= sp.max_new_tokens:
            self._finish(req, reason=finish_reason("length", length=sp.max_new_tokens))
        elif req.on_progress is not None:  # streaming: one event per token (the last one comes with on_done)
            self._call(req.on_progress, req)

    def _tail_has_stop(self, req: GenRequest) -> bool:
        """Cheap per-step check: only the last few tokens can complete a stop string (<= 4 bytes a char)."""
        tail = 4 * max(len(s) for s in req.sampling.stop) + 4
        return stop_match(self.tok.decode(req.output_ids[-tail:]), req.sampling.stop) is not None

    def _call(self, callback: Any, req: GenRequest) -> None:
        try:
            callback(req)
        except Exception:  # a vanished client must not break the engine
            log.exception("callback failed for %s", req.rid)

    def _finish(self, req: GenRequest, *, reason: dict[str, Any] | None = None, error: str | None = None,
                status: int = 500) -> None:
        if req.state == "finished":
            return
        if req in self._running:
            self._running.remove(req)
        if req in self._waiting:
            self._waiting.remove(req)
        if self._chunked is req:
            self._chunked = None
        self._transferring.pop(id(req), None)
        self.pages.release(req.seq)
        if error is not None and req.state != "transferring":
            # Failed before the role got it (rejected, OOM, step error): the role tells its PD peer now.
            self.role.abort_request(self._info(req), error)
        if error is not None:
            # in the server's log too (as SGLang logs its aborts): `pdctl diagnose` reads logs, not answers
            log.warning("request %s failed (HTTP %d): %s", req.rid, status, error)
            req.fail(error, status)
        else:
            req.finish, req.state = reason, "finished"
        if req.bootstrap_room is not None:
            with self._rooms_lock:
                room = int(req.bootstrap_room)
                self._rooms[room] = self._rooms.get(room, 1) - 1
                if self._rooms[room] <= 0:
                    del self._rooms[room]
        self.metrics.finished(req)
        if req.on_done is not None:
            self._call(req.on_done, req)
