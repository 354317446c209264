"""The engine thread: admits requests, runs batched model steps, samples, finishes requests.

HTTP handlers call `submit(req)` from any thread; everything else (pages, prefix cache, model steps, role
callbacks) happens on the one engine thread, so the KV cache needs no locking. Each step runs the new
prefills that fit the token budget together with one decode token of every running request. How many pages a
request holds and may still need is `pages.PageBook`'s business; the scheduler decides when.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections import deque
from typing import Any

import torch

from pdctl.reference.kvcache import KVCache, KVCacheOOM, SeqPages
from pdctl.reference.pages import PageBook, pages_for
from pdctl.reference.prefix_cache import PrefixCache
from pdctl.reference.ranks import Segment, TPModel
from pdctl.reference.request import GenRequest
from pdctl.reference.roles.base import FirstToken, KVHandle, RankPages, RequestInfo, Role
from pdctl.reference.sampling import choose, finish_reason, stop_match, top_logprobs
from pdctl.reference.tokenizer import ByteTokenizer

log = logging.getLogger("pdctl.reference.scheduler")


class Scheduler:
    """Owns the model, KV cache, prefix cache and role; runs them on a dedicated thread."""

    def __init__(
        self,
        model: TPModel,
        kv: KVCache,
        role: Role,
        *,
        radix_cache: bool,
        random_seed: int = 0,
        prefill_token_budget: int = 4096,
    ) -> None:
        self.model, self.kv, self.role = model, kv, role
        self.cfg = model.cfg
        self.ps = kv.page_size
        self.cache = PrefixCache(kv, self.cfg.sliding_window) if radix_cache else None
        self.pages = PageBook(kv, self.cache, self.cfg.sliding_window)
        self.window = self.pages.window
        self.tok = ByteTokenizer()
        self.random_seed = random_seed
        self.budget = prefill_token_budget
        self._inbox: queue.Queue[tuple[Any, ...]] = queue.Queue()
        self._waiting: deque[GenRequest] = deque()
        self._running: list[GenRequest] = []
        self._transferring: dict[int, GenRequest] = {}  # id(req) -> req, while a role moves its KV
        self._stop = threading.Event()
        self._counter = 0
        self._step_prefills: list[GenRequest] = []
        self.steps = 0
        self._thread = threading.Thread(target=self._loop, name="engine", daemon=True)

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
        self._inbox.put(("new", req))

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
            except Exception as exc:  # never let one bad step kill the server
                log.exception("engine step failed")
                for req in list(self._running) + self._step_prefills:
                    self._finish(req, error=f"engine step failed: {exc}")
        for req in list(self._running) + list(self._waiting) + list(self._transferring.values()):
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
        elif kind == "flush":
            item[1].put(self.cache.flush() if self.cache else 0)
        elif kind == "prefill_done":
            self._on_prefill_done(item[1], item[2])
        elif kind == "decode_ready":
            self._on_decode_ready(item[1], item[2])

    def _step(self) -> bool:
        """One model step; False when there was nothing to run (the loop then blocks on its inbox)."""
        segments: list[Segment] = []
        prefills: list[GenRequest] = []
        self._step_prefills = prefills
        budget = self.budget
        while self._waiting:
            if prefills and self._waiting[0].prompt_len > budget:
                break
            req = self._waiting.popleft()
            admitted = self._admit(req)
            if admitted is None:  # not enough pages now; retry when running requests free some
                self._waiting.appendleft(req)
                break
            if admitted is False:
                continue
            prefills.append(req)
            segments.append(admitted)
            budget -= len(admitted.tokens)
        decodes = []
        for req in list(self._running):
            seg = self._decode_segment(req)
            if seg is not None:
                decodes.append(req)
                segments.append(seg)
        if not segments:
            return False
        logits = self.model.forward(segments)
        self.steps += 1
        for req, rows in zip(prefills, logits[: len(prefills)]):
            self._after_prefill(req, rows)
        for req, rows in zip(decodes, logits[len(prefills) :]):
            self._append(req, rows[-1])
        return True

    # ---- PD hand-off --------------------------------------------------------------------------------
    def _kv_handle(self, req: GenRequest, swa_first: int) -> KVHandle:
        seq = req.seq
        assert seq is not None
        swa = list(seq.swa[swa_first:]) if self.kv.swa_alloc is not None else []
        ranks = [RankPages(r, seq.full[: pages_for(req.prompt_len, self.ps)], swa) for r in range(self.model.tp)]
        return KVHandle(req.prompt_len, req.cached_tokens, self.ps, swa_first, ranks)

    def _info(self, req: GenRequest) -> RequestInfo:
        return RequestInfo(
            req.rid, req.input_ids, req.bootstrap_host, req.bootstrap_port, req.bootstrap_room, req.top_logprobs_num
        )

    # ---- admission -----------------------------------------------------------------------------------
    def _admit(self, req: GenRequest) -> Segment | None | bool:
        """Pages + prefix match for REQ: a prefill Segment, None (no room yet), or False (handled here)."""
        decode_role = self.role.name == "decode"
        max_prefix = req.prompt_len - 1
        if req.return_logprob and req.logprob_start_len >= 0:
            max_prefix = min(max_prefix, req.logprob_start_len)
        if decode_role:
            max_prefix = req.prompt_len
        match = self.cache.match(req.input_ids, max_prefix) if self.cache is not None else None
        if self._busy() and not self._fits(req, match.pages if match else 0):
            if self.cache is None or self.cache.evict() == 0:
                return None
            match = self.cache.match(req.input_ids, max_prefix)
            if not self._fits(req, match.pages):
                return None
        seq = SeqPages([], [])
        try:
            if match and match.pages:
                self.cache.hold(match)  # type: ignore[union-attr]
                seq = SeqPages(list(match.full), list(match.swa))
            prefix = len(seq.full) * self.ps
            swa_from = len(seq.full)
            if decode_role and self.window is not None:
                swa_from = max(prefix, req.prompt_len - self.window) // self.ps
            self.pages.grow(seq, req.prompt_len, swa_from)
        except KVCacheOOM as exc:
            self.pages.release(seq)
            if self._busy():
                return None
            self._finish(req, error=str(exc), status=503)
            return False
        req.seq, req.cached_tokens = seq, prefix
        if decode_role:
            req.state = "transferring"
            self._transferring[id(req)] = req
            handle = self._kv_handle(req, swa_from if self.window is not None else 0)
            try:
                self.role.before_decode(self._info(req), handle,
                                        lambda r, q=req: self._inbox.put(("decode_ready", q, r)))
            except Exception as exc:  # a role bug must answer the request, not hang it
                log.exception("before_decode failed")
                self._finish(req, error=f"decode role failed: {exc}")
            return False
        start = req.logprob_start
        logits_from = max(0, start - prefix) if start < req.prompt_len else req.prompt_len - 1 - prefix
        return Segment(seq, req.input_ids[prefix:], prefix, logits_from)

    def _busy(self) -> bool:
        return bool(self._running or self._transferring or self._step_prefills)

    def _fits(self, req: GenRequest, matched_pages: int) -> bool:
        admitted = [*self._running, *self._transferring.values(), *self._step_prefills]
        return self.pages.fits(req, matched_pages, admitted, prefill_role=self.role.name == "prefill")

    def _after_prefill(self, req: GenRequest, rows: torch.Tensor) -> None:
        lp = torch.log_softmax(rows, dim=-1)
        start, prefix = req.logprob_start, req.cached_tokens
        if start < req.prompt_len:
            base = max(0, start - prefix)  # row of the first logprob row (position `start`)
            req.input_logprobs = [None]
            req.input_top = [None]
            for p in range(start + 1, req.prompt_len):
                row = lp[p - 1 - prefix - base]
                req.input_logprobs.append(float(row[req.input_ids[p]]))
                req.input_top.append(top_logprobs(row, req.top_logprobs_num) if req.top_logprobs_num else None)
        if self.cache is not None:
            self.cache.insert(req.input_ids, req.seq, req.prompt_len)  # type: ignore[arg-type]
        assert req.seq is not None
        self.pages.slide_window(req.seq, req.prompt_len)
        if self.role.name == "prefill":
            token = choose(rows[-1], req.sampling, req.generator)
            first = FirstToken(token, float(lp[-1][token]), top_logprobs(lp[-1], req.top_logprobs_num))
            self._record(req, first)
            req.state = "transferring"
            self._transferring[id(req)] = req
            swa_first = max(0, req.prompt_len - self.window) // self.ps if self.window is not None else 0
            try:
                self.role.after_prefill(
                    self._info(req), self._kv_handle(req, swa_first), first,
                    lambda err, q=req: self._inbox.put(("prefill_done", q, err)),
                )
            except Exception as exc:  # a role bug must answer the request, not hang it
                log.exception("after_prefill failed")
                self._finish(req, error=f"prefill role failed: {exc}")
            return
        req.state = "running"
        self._running.append(req)
        if req.sampling.max_new_tokens == 0:
            self._finish(req, reason=finish_reason("length", length=0))
            return
        self._append(req, rows[-1])

    def _on_prefill_done(self, req: GenRequest, err: str | None) -> None:
        if self._transferring.pop(id(req), None) is None:
            log.warning("prefill role called done twice (or late) for %s; ignored", req.rid)
            return
        if err:
            self._finish(req, error=f"KV transfer failed: {err}")
        else:
            self._finish(req, reason=finish_reason("length", length=len(req.output_ids)))

    def _on_decode_ready(self, req: GenRequest, result: FirstToken | str) -> None:
        if self._transferring.pop(id(req), None) is None:
            log.warning("decode role called done twice (or late) for %s; ignored", req.rid)
            return
        if isinstance(result, str):
            self._finish(req, error=f"KV transfer failed: {result}")
            return
        # SGLang's decode reports the prefill's prefix-cache hit (carried with the first token), or its own
        # radix-cache hit when that is larger.
        req.cached_tokens = max(req.cached_tokens, int(getattr(result, "cached_tokens", 0)))
        if self.cache is not None:
            self.cache.insert(req.input_ids, req.seq, req.prompt_len)  # type: ignore[arg-type]
        req.state = "running"
        self._running.append(req)
        self._record(req, result)
        self._check_finish(req)

    # ---- decoding ------------------------------------------------------------------------------------
    def _decode_segment(self, req: GenRequest) -> Segment | None:
        pos = req.prompt_len + len(req.output_ids) - 1
        assert req.seq is not None
        try:
            self.pages.grow(req.seq, pos + 1, len(req.seq.swa))
        except KVCacheOOM as exc:
            self._finish(req, error=str(exc), status=503)
            return None
        return Segment(req.seq, [req.output_ids[-1]], pos, 0)

    def _record(self, req: GenRequest, first: FirstToken) -> None:
        req.output_ids.append(first.token_id)
        req.output_logprobs.append(first.logprob)
        req.output_top.append(list(first.top_logprobs))

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

    def _tail_has_stop(self, req: GenRequest) -> bool:
        """Cheap per-step check: only the last few tokens can complete a stop string (<= 4 bytes a char)."""
        tail = 4 * max(len(s) for s in req.sampling.stop) + 4
        return stop_match(self.tok.decode(req.output_ids[-tail:]), req.sampling.stop) is not None

    def _finish(self, req: GenRequest, *, reason: dict[str, Any] | None = None, error: str | None = None,
                status: int = 500) -> None:
        if req.state == "finished":
            return
        if req in self._running:
            self._running.remove(req)
        if req in self._waiting:
            self._waiting.remove(req)
        self._transferring.pop(id(req), None)
        self.pages.release(req.seq)
        if error is not None and req.state != "transferring":
            # Failed before the role got it (rejected, OOM, step error): the role tells its PD peer now.
            self.role.abort_request(self._info(req), error)
        if error is not None:
            req.fail(error, status)
        else:
            req.finish, req.state = reason, "finished"
        if req.on_done is not None:
            try:
                req.on_done(req)
            except Exception:  # a vanished client must not break the engine
                log.exception("on_done failed for %s", req.rid)
