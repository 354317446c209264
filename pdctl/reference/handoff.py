"""The scheduler's side of PD disaggregation: handing a request's KV pages to the prefill or decode role and
taking the role's answer back (on the engine thread, through the scheduler's inbox).

A mixin of pdctl.reference.scheduler.Scheduler (kept apart so each file stays one concern): it uses the
scheduler's `kv`, `model`, `ps`, `window`, `cache`, `role`, `_inbox`, `_transferring`, `_running`, `_record`,
`_check_finish` and `_finish`.
"""

from __future__ import annotations

import logging
from typing import Any

from pdctl.reference.pages import pages_for
from pdctl.reference.request import GenRequest
from pdctl.reference.roles.base import FirstToken, KVHandle, RankPages, RequestInfo
from pdctl.reference.sampling import finish_reason

log = logging.getLogger("pdctl.reference.scheduler")


class PDHandoff:
    """Role hand-off and completion for prefill (send KV after the prompt) and decode (receive it first)."""

    kv: Any
    model: Any
    ps: int
    window: int | None
    cache: Any
    role: Any
    _inbox: Any
    _transferring: dict[int, GenRequest]
    _running: list[GenRequest]

    def _record(self, req: GenRequest, first: FirstToken) -> None: ...
    def _check_finish(self, req: GenRequest) -> None: ...
    def _finish(self, req: GenRequest, **kw: Any) -> None: ...

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

    def _hand_to_prefill_role(self, req: GenRequest, first: FirstToken) -> None:
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

    def _hand_to_decode(self, req: GenRequest, swa_first: int) -> None:
        req.state = "transferring"
        self._transferring[id(req)] = req
        try:
            self.role.before_decode(self._info(req), self._kv_handle(req, swa_first),
                                    lambda r, q=req: self._inbox.put(("decode_ready", q, r)))
        except Exception as exc:  # a role bug must answer the request, not hang it
            log.exception("before_decode failed")
            self._finish(req, error=f"decode role failed: {exc}")

    def _settled(self, req: GenRequest, side: str) -> bool:
        """The role is done with REQ's pages; False when nothing is left to do (a late call, or a client that
        went away meanwhile: the request then finishes as aborted)."""
        if self._transferring.pop(id(req), None) is None:
            log.warning("%s role called done twice (or late) for %s; ignored", side, req.rid)
            return False
        if req.abort_message is not None:
            self._finish(req, error=req.abort_message, status=499)
            return False
        return True

    def _on_prefill_done(self, req: GenRequest, err: str | None) -> None:
        if not self._settled(req, "prefill"):
            return
        if err:
            self._finish(req, error=f"KV transfer failed: {err}")
        else:
            self._finish(req, reason=finish_reason("length", length=len(req.output_ids)))

    def _on_decode_ready(self, req: GenRequest, result: FirstToken | str) -> None:
        if not self._settled(req, "decode"):
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
