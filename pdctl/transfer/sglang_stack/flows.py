"""One request through SGLang's senders and receivers, the way its schedulers drive them, with a stage on
every failure.

Runs in SGLang's interpreter. The prefill scheduler creates a KVSender per request, polls it until decode's
destination arrived (`WaitingForInput`), then `init(num_pages, aux_index)` and `send(page_indices,
state_indices)`, and polls until `Success`; the decode scheduler first fetches the prefill's parallel info
(`try_ensure_parallel_info`, where SGLang's handshake checks run), then per request a KVReceiver: `init`,
`send_metadata(page_indices, aux_index, state_indices)`, poll until `Success`. Page indices are page ids, and
for a hybrid sliding-window model the state indices are the SWA pool's page ids of the window.

Stages (pdctl.sglang.stages) are named from where a failure surfaced: the handshake (decode's fetch of the
prefill's info), registration (the prefill's processing of a decode rank's KVArgs, in SGLang's bootstrap
thread, which dies on an exception and leaves the request hanging: pdctl reports it at once), or the first
transfer (anything after the destination was sent, and every timeout on the way there).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pdctl.transfer.sglang_stack.runtime import FAILURES

POLL_S = 0.001
# Functions of SGLang's prefill bootstrap thread that process a decode rank's registration (not a room).
REGISTRATION_FRAMES = ("_add_remote_peer", "KVArgsRegisterInfo", "_prepare_payload_xfer", "prep_handle",
                       "_register_decode", "decode_kv_args_table")


class StackFailure(Exception):
    """SGLang's stack failed: STAGE (a pdctl.sglang.stages key) and SGLang's own message."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message


@dataclass(frozen=True)
class RankRequest:
    """One rank's part of a request: its page ids, SWA window page ids (None: no SWA state), aux slot."""

    pages: Sequence[int]
    swa_pages: Sequence[int] | None
    aux_index: int


def thread_failure(mark: int) -> StackFailure | None:
    """A failure of one of SGLang's threads since MARK, with the stage its traceback points at."""
    events = FAILURES.since(mark)
    if not events:
        return None
    event = events[0]
    stage = "registration" if any(f in event["traceback"] for f in REGISTRATION_FRAMES) else "first transfer"
    return StackFailure(stage, f"SGLang's {event['thread']} thread died: {event['error']} (SGLang itself would "
                               "leave the request waiting until its bootstrap/waiting timeout)")


def _failure_text(item: Any) -> str:
    try:
        item.failure_exception()
    except Exception as exc:  # noqa: BLE001 - SGLang raises its KVTransferError (or whatever failed)
        return f"{type(exc).__name__}: {exc}"
    return "failed (SGLang gave no exception)"


def wait_all(items: list[Any], want: int, *, stage: str, what: str, deadline: float, mark: int,
             check: Callable[[], None] | None = None) -> None:
    """Poll ITEMS (senders or receivers) until each reports WANT; a Failed poll, a dead SGLang thread, or
    the deadline raises StackFailure (STAGE unless the failure says otherwise)."""
    from sglang.srt.disaggregation.base.conn import KVPoll

    pending = list(range(len(items)))
    while pending:
        still = []
        for i in pending:
            state = items[i].poll()
            if state == KVPoll.Failed:
                raise StackFailure(stage, f"rank {i} {what}: {_failure_text(items[i])}")
            if state < want:
                still.append(i)
        pending = still
        if not pending:
            return
        dead = thread_failure(mark)
        if dead is not None:
            raise dead
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise StackFailure(stage, f"rank(s) {pending} {what}: no answer before the timeout "
                                      f"(state {[int(items[i].poll()) for i in pending]}; SGLang's KVPoll: "
                                      "1 bootstrapping, 2 waiting for input, 3 transferring)")
        time.sleep(POLL_S)


def send(managers: list[Any], backend: str, bootstrap_addr: str, room: int, parts: list[RankRequest],
         timeout: float, check: Callable[[], None] | None = None) -> dict[str, float]:
    """Prefill: every rank's KVSender for ROOM; returns timings. Raises StackFailure."""
    import numpy as np
    from sglang.srt.disaggregation.base.conn import KVPoll
    from sglang.srt.disaggregation.utils import KVClassType, TransferBackend, get_kv_class

    mark = FAILURES.mark()
    cls = get_kv_class(TransferBackend(backend), KVClassType.SENDER)
    t0 = time.monotonic()
    deadline = t0 + timeout
    senders = [cls(mgr=m, bootstrap_addr=bootstrap_addr, bootstrap_room=room) for m in managers]
    wait_all(senders, KVPoll.WaitingForInput, stage="first transfer", what="waited for decode's destination",
             deadline=deadline, mark=mark, check=check)
    t_ready = time.monotonic()
    for sender, part in zip(senders, parts, strict=True):
        prefix = sender.pop_decode_prefix_len()
        pages = np.asarray(part.pages, dtype=np.int32)[prefix // _page_size(sender):]
        sender.init(len(pages), part.aux_index)
        state = None if part.swa_pages is None else [np.asarray(part.swa_pages, dtype=np.int32)]
        sender.send(pages, state)
    wait_all(senders, KVPoll.Success, stage="first transfer", what="sent", deadline=deadline, mark=mark,
             check=check)
    t_done = time.monotonic()
    return {"bootstrap_s": t_ready - t0, "transfer_s": t_done - t_ready}


def _page_size(sender: Any) -> int:
    return int(sender.kv_mgr.kv_args.page_size)


def ensure_parallel_info(managers: list[Any], bootstrap_addr: str, deadline: float,
                         check: Callable[[], None] | None = None) -> None:
    """Decode: fetch the prefill's parallel info on every rank (SGLang's handshake checks raise here)."""
    for i, mgr in enumerate(managers):
        while True:
            try:
                if mgr.try_ensure_parallel_info(bootstrap_addr):
                    break
            except Exception as exc:
                raise StackFailure("handshake", f"{type(exc).__name__}: {exc}") from exc
            if check is not None:
                check()
            if time.monotonic() > deadline:
                raise StackFailure("handshake", f"rank {i}: the prefill's bootstrap server at {bootstrap_addr} "
                                                "never reported every prefill rank registered")
            time.sleep(0.1)


def receive(managers: list[Any], backend: str, bootstrap_addr: str, room: int, parts: list[RankRequest],
            timeout: float, check: Callable[[], None] | None = None, prefix_len: int = 0) -> dict[str, float]:
    """Decode: handshake, then every rank's KVReceiver for ROOM; returns timings. Raises StackFailure."""
    import numpy as np
    from sglang.srt.disaggregation.base.conn import KVPoll
    from sglang.srt.disaggregation.utils import KVClassType, TransferBackend, get_kv_class

    mark = FAILURES.mark()
    t0 = time.monotonic()
    deadline = t0 + timeout
    ensure_parallel_info(managers, bootstrap_addr, deadline, check)
    cls = get_kv_class(TransferBackend(backend), KVClassType.RECEIVER)
    receivers = [cls(mgr=m, bootstrap_addr=bootstrap_addr, bootstrap_room=room) for m in managers]
    try:
        for receiver in receivers:
            receiver.init(0)
    except Exception as exc:
        raise StackFailure("registration", f"{type(exc).__name__}: {exc}") from exc
    wait_all(receivers, KVPoll.WaitingForInput, stage="registration", what="registered with the prefill",
             deadline=deadline, mark=mark, check=check)
    t_ready = time.monotonic()
    for receiver, part in zip(receivers, parts, strict=True):
        state = None if part.swa_pages is None else [np.asarray(part.swa_pages, dtype=np.int32)]
        kwargs = {"decode_prefix_len": prefix_len} if prefix_len else {}
        receiver.send_metadata(np.asarray(part.pages, dtype=np.int32), part.aux_index, state, **kwargs)
    wait_all(receivers, KVPoll.Success, stage="first transfer", what="received", deadline=deadline, mark=mark,
             check=check)
    return {"bootstrap_s": t_ready - t0, "transfer_s": time.monotonic() - t_ready}
