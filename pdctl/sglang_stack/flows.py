"""One request through SGLang's senders and receivers, the way its schedulers drive them, with a stage on
every failure.

Runs in SGLang's interpreter. The prefill scheduler creates a KVSender per request, polls it until decode's
destination arrived (`WaitingForInput`), then `init(num_pages, aux_index)` and `send(page_indices,
state_indices)`, and polls until `Success`; the decode scheduler first fetches the prefill's parallel info
(`try_ensure_parallel_info`, where SGLang's handshake checks run), then per request a KVReceiver: `init`,
`send_metadata(page_indices, aux_index, state_indices)`, poll until `Success`. Page indices are page ids; the
state indices are, for a hybrid sliding-window model, the SWA pool's page ids of the window, for a hybrid
linear-attention model the request's mamba slot (one index: prefill.py / decode.py `_mamba_payload`).

`SendFlow` / `ReceiveFlow` advance one step per `step()` call, as a scheduler loop polls; one thread steps
every request in flight (the reference engine's roles), or `run()` steps one request to its end (a rehearsal).

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

from pdctl.sglang_stack.runtime import FAILURES

POLL_S = 0.001
# Functions of SGLang's prefill bootstrap thread that process a decode rank's registration (not a room).
REGISTRATION_FRAMES = ("_add_remote_peer", "KVArgsRegisterInfo", "_prepare_payload_xfer", "prep_handle",
                       "_register_decode", "decode_kv_args_table")
HANDSHAKE_RETRY_S = 0.1


class StackFailure(Exception):
    """SGLang's stack failed: STAGE (a pdctl.sglang.stages key) and SGLang's own message."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage
        self.message = message


@dataclass(frozen=True)
class RankRequest:
    """One rank's part of a request: its page ids, SWA window page ids (None: no SWA state), aux slot, mamba
    slot (None: no linear attention)."""

    pages: Sequence[int]
    swa_pages: Sequence[int] | None
    aux_index: int
    mamba_slot: int | None = None


def thread_failure(mark: int) -> StackFailure | None:
    """A failure of one of SGLang's threads since MARK, with the stage its traceback points at."""
    events = FAILURES.since(mark)
    if not events:
        return None
    event = events[0]
    stage = "registration" if any(f in event["traceback"] for f in REGISTRATION_FRAMES) else "first transfer"
    where = _last_sglang_frame(event["traceback"])
    return StackFailure(stage, f"SGLang's {event['thread']} thread died: {event['error']}{where} (SGLang itself "
                               "would leave the request waiting until its bootstrap/waiting timeout)")


def _last_sglang_frame(text: str) -> str:
    frames = [line.strip() for line in text.splitlines() if line.strip().startswith('File "') and "sglang" in line]
    if not frames:
        return ""
    path, _, rest = frames[-1][6:].partition('", line ')
    line, _, func = rest.partition(", in ")
    return f" at {'/'.join(path.split('/')[-2:])}:{line} in {func}"


def _failure_text(item: Any) -> str:
    try:
        item.failure_exception()
    except Exception as exc:  # noqa: BLE001 - SGLang raises its KVTransferError (or whatever failed)
        return f"{type(exc).__name__}: {exc}"
    return "failed (SGLang gave no exception)"


def kv_classes(backend: str) -> tuple[Any, Any]:
    from sglang.srt.disaggregation.utils import KVClassType, TransferBackend, get_kv_class

    kind = TransferBackend(backend)
    return get_kv_class(kind, KVClassType.SENDER), get_kv_class(kind, KVClassType.RECEIVER)


def _state(part: RankRequest) -> Any:
    import numpy as np

    # one entry per state component, in setup_state_kv_args' order (a pool has SWA or mamba state, not both)
    if part.swa_pages is not None:
        return [np.asarray(part.swa_pages, dtype=np.int32)]
    if part.mamba_slot is not None:
        return [np.asarray([part.mamba_slot], dtype=np.int32)]
    return None


class _Flow:
    """Shared stepping: poll every item for a KVPoll state, fail on Failed, dead threads or the deadline."""

    def __init__(self, timeout: float) -> None:
        self.mark = FAILURES.mark()
        self.t0 = time.monotonic()
        self.deadline = self.t0 + timeout
        self.timings: dict[str, float] = {}
        self.items: list[Any] = []

    def _reached(self, want: int, stage: str, what: str) -> bool:
        from sglang.srt.disaggregation.base.conn import KVPoll

        states = [item.poll() for item in self.items]
        for i, state in enumerate(states):
            if state == KVPoll.Failed:
                raise StackFailure(stage, f"rank {i} {what}: {_failure_text(self.items[i])}")
        if all(s >= want for s in states):
            return True
        dead = thread_failure(self.mark)
        if dead is not None:
            raise dead
        if time.monotonic() > self.deadline:
            late = [i for i, s in enumerate(states) if s < want]
            raise StackFailure(stage, f"rank(s) {late} {what}: no answer before the timeout (state "
                                      f"{[int(states[i]) for i in late]}; SGLang's KVPoll: 1 bootstrapping, 2 "
                                      "waiting for input, 3 transferring)")
        return False

    def step(self) -> dict[str, float] | None:  # pragma: no cover - overridden
        raise NotImplementedError

    def run(self, check: Callable[[], None] | None = None) -> dict[str, float]:
        """Step to the end (CHECK may raise to stop waiting); the timings, or StackFailure."""
        try:
            while (done := self.step()) is None:
                if check is not None:
                    check()
                time.sleep(POLL_S)
            return done
        finally:
            self.clear()

    def clear(self) -> None:
        """SGLang's per-request cleanup (`clear()`: the room's status and bookkeeping), as its schedulers do."""
        for item in self.items:
            try:
                item.clear()
            except Exception:  # noqa: BLE001, S110 - cleanup of a failed request must not mask its failure
                pass


class SendFlow(_Flow):
    """Prefill: every rank's KVSender for one room."""

    def __init__(self, managers: list[Any], backend: str, bootstrap_addr: str, room: int,
                 parts: list[RankRequest], timeout: float) -> None:
        super().__init__(timeout)
        sender, _ = kv_classes(backend)
        self.parts = parts
        self.items = [sender(mgr=m, bootstrap_addr=bootstrap_addr, bootstrap_room=room) for m in managers]
        self.sent = False

    def step(self) -> dict[str, float] | None:
        import numpy as np
        from sglang.srt.disaggregation.base.conn import KVPoll

        if not self.sent:
            if not self._reached(KVPoll.WaitingForInput, "first transfer", "waited for decode's destination"):
                return None
            self.timings["bootstrap_s"] = time.monotonic() - self.t0
            for sender, part in zip(self.items, self.parts, strict=True):
                prefix = sender.pop_decode_prefix_len()
                skip = prefix // int(sender.kv_mgr.kv_args.page_size)
                pages = np.asarray(part.pages, dtype=np.int32)[skip:]
                sender.init(len(pages), part.aux_index)
                sender.send(pages, _state(part))
            self.sent = True
            self.t_sent = time.monotonic()
        if not self._reached(KVPoll.Success, "first transfer", "sent"):
            return None
        self.timings["transfer_s"] = time.monotonic() - self.t_sent
        return self.timings


class ReceiveFlow(_Flow):
    """Decode: the prefill's parallel info (handshake), then every rank's KVReceiver for one room."""

    def __init__(self, managers: list[Any], backend: str, bootstrap_addr: str, room: int,
                 parts: list[RankRequest], timeout: float, prefix_len: int = 0) -> None:
        super().__init__(timeout)
        _, self.receiver_cls = kv_classes(backend)
        self.managers, self.addr, self.room, self.parts, self.prefix_len = managers, bootstrap_addr, room, parts, \
            prefix_len
        self.phase = "handshake"
        self.next_try = 0.0

    def _handshake(self) -> bool:
        now = time.monotonic()
        if now < self.next_try:
            return False
        for i, mgr in enumerate(self.managers):
            try:
                ready = mgr.try_ensure_parallel_info(self.addr)
            except Exception as exc:
                raise StackFailure("handshake", f"{type(exc).__name__}: {exc}") from exc
            if not ready:
                if now > self.deadline:
                    raise StackFailure("handshake", f"rank {i}: the prefill's bootstrap server at {self.addr} never "
                                                    "reported every prefill rank registered")
                self.next_try = now + HANDSHAKE_RETRY_S
                return False
        return True

    def step(self) -> dict[str, float] | None:
        import numpy as np
        from sglang.srt.disaggregation.base.conn import KVPoll

        if self.phase == "handshake":
            if not self._handshake():
                return None
            self.items = [self.receiver_cls(mgr=m, bootstrap_addr=self.addr, bootstrap_room=self.room)
                          for m in self.managers]
            try:
                for receiver in self.items:
                    receiver.init(0)
            except Exception as exc:
                raise StackFailure("registration", f"{type(exc).__name__}: {exc}") from exc
            self.phase = "registration"
        if self.phase == "registration":
            if not self._reached(KVPoll.WaitingForInput, "registration", "registered with the prefill"):
                return None
            self.timings["bootstrap_s"] = time.monotonic() - self.t0
            for receiver, part in zip(self.items, self.parts, strict=True):
                kwargs = {"decode_prefix_len": self.prefix_len} if self.prefix_len else {}
                receiver.send_metadata(np.asarray(part.pages, dtype=np.int32), part.aux_index, _state(part),
                                       **kwargs)
            self.phase = "transfer"
            self.t_sent = time.monotonic()
        if not self._reached(KVPoll.Success, "first transfer", "received"):
            return None
        self.timings["transfer_s"] = time.monotonic() - self.t_sent
        return self.timings


def send(managers: list[Any], backend: str, bootstrap_addr: str, room: int, parts: list[RankRequest],
         timeout: float, check: Callable[[], None] | None = None) -> dict[str, float]:
    """Prefill: one request to its end; timings, or StackFailure."""
    return SendFlow(managers, backend, bootstrap_addr, room, parts, timeout).run(check)


def receive(managers: list[Any], backend: str, bootstrap_addr: str, room: int, parts: list[RankRequest],
            timeout: float, check: Callable[[], None] | None = None, prefix_len: int = 0) -> dict[str, float]:
    """Decode: one request to its end; timings, or StackFailure."""
    return ReceiveFlow(managers, backend, bootstrap_addr, room, parts, timeout, prefix_len).run(check)
