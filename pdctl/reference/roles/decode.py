"""DecodeRole: register with a prefill (handshake), ask per room, wait for the KV + aux, or fail fast.

One receiver thread polls every rank's backend for notifications ("kv ROOM PREFILL_RANK ok|err MSG"); a room
is complete when every (prefill rank, decode rank) pair the plan pairs has reported. Failure is an answer,
never a hang: a handshake rejection fails the request at once with SGLang's message, an error notification
with the prefill's message, a silent prefill after --transfer-timeout, and a dead prefill (its bootstrap
port refuses connections twice in a row) within a few seconds. A slow prefill is not a dead one
(pdctl.reference.roles.liveness): the heartbeat lists the rooms decode holds, and each room the prefill says
it holds gets a fresh --transfer-timeout, so a loaded machine delays requests instead of failing them.

The receiver polls fast while rooms are pending (the poll is also what progresses UCX for NIXL, which runs
without its own progress thread) and sleeps on an event when none is, so an idle decode costs no CPU.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pdctl.plan import prefill_peers
from pdctl.reference.roles import bootstrap
from pdctl.reference.roles.base import DecodeDone, FirstToken, KVHandle, RequestInfo, RoleContext
from pdctl.reference.roles.common import AuxSlots, PDFirstToken, make_backends, pools_desc, server_info
from pdctl.reference.roles.handshake import handshake_problem
from pdctl.reference.roles.liveness import PeerHealth, RoomClock
from pdctl.reference.roles.sender import aux_cached_tokens, decode_aux

log = logging.getLogger("pdctl.reference.roles")


def _bootstrap_addr(req: RequestInfo) -> str | None:
    """The prefill's bootstrap "host:port" the router put in REQ, or None when it is missing."""
    if not req.bootstrap_host or req.bootstrap_port is None:
        return None
    return f"{req.bootstrap_host}:{int(req.bootstrap_port)}"


@dataclass
class _Pending:
    room: int
    addr: str
    expected: set[tuple[int, int]]
    done: DecodeDone
    started: float
    slot: int
    got: set[tuple[int, int]] = field(default_factory=set)
    giving_up: bool = False
    kv: KVHandle | None = None  # for the test hook (roles/corrupt.py) only
    saved: Any = None


class DecodeRole:
    """Decode side of PD: receiving endpoints (one per rank), registrations per prefill, pending rooms."""

    name = "decode"

    def __init__(self, ctx: RoleContext) -> None:
        self.ctx = ctx
        self.info = server_info(ctx, "decode")
        self.decode_id = uuid.uuid4().hex
        self.timeout = float(ctx.settings.transfer_timeout)
        self.backends: list[Any] = []
        self.aux = AuxSlots()
        self._registered: dict[str, dict[str, Any]] = {}  # bootstrap addr -> prefill ServerInfo
        self._reg_lock = threading.Lock()
        self._pending: dict[int, _Pending] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._work = threading.Event()  # set while rooms are pending: the receiver polls fast
        self.clock = RoomClock()  # when the prefill last confirmed it holds each room
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="pd-recv")
        self._threads: list[threading.Thread] = []
        self.corruptor = ctx.settings.extra.get("corrupt_kv")  # TEST HOOK: None in every real deployment

    def start(self) -> None:
        """Register pools (and the aux slots on rank 0), start the receiver and the watchdog."""
        self.backends = make_backends(self.ctx, "decode")
        self.backends[0].register([self.aux.region])
        for target, name in ((self._receive_loop, "pd-receiver"), (self._watchdog_loop, "pd-watchdog")):
            t = threading.Thread(target=target, name=name, daemon=True)
            t.start()
            self._threads.append(t)

    def shutdown(self) -> None:
        """Fail what is pending, stop the threads, release endpoints."""
        self._stop.set()
        self._work.set()
        for t in self._threads:
            t.join(timeout=2)
        with self._lock:
            rooms = list(self._pending)
        for room in rooms:
            self._finish(room, "decode server is shutting down")
        self._pool.shutdown(wait=False, cancel_futures=True)
        for backend in self.backends:
            backend.close()

    # ---- the hook (engine thread) -------------------------------------------------------------------
    def before_decode(self, req: RequestInfo, kv: KVHandle, done: DecodeDone) -> None:
        """Register/ask on a worker thread; the engine thread returns at once."""
        self._pool.submit(self._begin, req, kv, done)

    def _begin(self, req: RequestInfo, kv: KVHandle, done: DecodeDone) -> None:
        addr = _bootstrap_addr(req)
        if addr is None or req.bootstrap_room is None:
            self._count(False, bootstrap=True)
            done(
                "decode request without bootstrap_host/bootstrap_port/bootstrap_room: "
                "send PD requests through the PD router"
            )
            return
        room = int(req.bootstrap_room)
        try:
            prefill = self._ensure_registered(addr)
            slot = self.aux.alloc()  # RuntimeError when every aux slot is in flight
        except Exception as exc:  # noqa: BLE001 - any failure here is the request's error answer
            self._abort(addr, room, str(exc))
            self._count(False, bootstrap=True)
            done(str(exc))
            return
        p_tp = int(prefill["tp_size"])
        expected = {(p, d) for d in range(self.ctx.tp) for p in prefill_peers(p_tp, self.ctx.tp, d)}
        pending = _Pending(room, addr, expected, done, time.monotonic(), slot)
        if self.corruptor is not None:
            pending.kv, pending.saved = kv, self.corruptor.before_transfer(kv)
        with self._lock:
            self._pending[room] = pending
        self._work.set()
        doc = {
            "decode_id": self.decode_id,
            "room": room,
            "cached_len": kv.cached_len,
            "swa_first_page": kv.swa_first_page,
            "aux_addr": self.aux.addr(slot),
            "ranks": [{"full_pages": r.full_pages, "swa_pages": r.swa_pages} for r in kv.ranks],
        }
        log.info("room %d: asking prefill %s for its KV", room, addr)
        try:
            try:
                bootstrap.post(addr, "/room", doc, wait=self.timeout)
            except bootstrap.BootstrapError as exc:
                if "not registered" not in str(exc):
                    raise
                with self._reg_lock:  # the prefill restarted and forgot us: register again, once
                    self._registered.pop(addr, None)
                self._ensure_registered(addr)
                bootstrap.post(addr, "/room", doc, wait=self.timeout)
        except Exception as exc:  # noqa: BLE001 - any failure here is the request's error answer
            self._finish(room, str(exc))

    def _ensure_registered(self, addr: str) -> dict[str, Any]:
        """GET /route, check locally (SGLang's decode-side sanity checks), POST /register per rank."""
        with self._reg_lock:
            if addr in self._registered:
                return self._registered[addr]
            prefill = bootstrap.get_route(addr, wait=self.timeout)
            problem = handshake_problem(prefill, self.info)
            if problem:
                raise RuntimeError(problem)
            for rank, backend in enumerate(self.backends):
                bootstrap.post(
                    addr,
                    "/register",
                    {
                        "decode_id": self.decode_id,
                        "rank": rank,
                        "info": self.info,
                        "metadata": backend.metadata(),
                        "pools": pools_desc(self.ctx.kv.ranks[rank]),
                    },
                    wait=self.timeout,
                )
            self._registered[addr] = prefill
            log.info("registered %d decode ranks with prefill %s", len(self.backends), addr)
            return prefill

    def _abort(self, addr: str, room: int, message: str, timeout: float = 2.0) -> None:
        """Tell the prefill this room is given up, so its request fails now too and it never writes into
        the room's pages; the prefill answers once no write for the room is in flight any more."""
        try:
            bootstrap.post(addr, "/room", {"room": room, "abort": message}, timeout=timeout, wait=timeout)
        except Exception:  # noqa: BLE001, S110 - the prefill may be dead; decode already answers
            pass

    def _give_up(self, pending: _Pending, message: str) -> None:
        """Timeout: abort the room on the prefill FIRST (it drains in-flight writes), then free the pages."""
        self._abort(pending.addr, pending.room, message, timeout=10.0)
        self._finish(pending.room, message)

    def abort_request(self, req: RequestInfo, message: str) -> None:
        """Engine thread: REQ failed here before its transfer began (e.g. no KV room): fail prefill's side."""
        addr = _bootstrap_addr(req)
        if addr is None or req.bootstrap_room is None:
            return
        try:
            self._pool.submit(self._abort, addr, int(req.bootstrap_room), message)
        except RuntimeError:  # shutting down
            pass

    # ---- completion (receiver / watchdog threads) ---------------------------------------------------
    def _finish(self, room: int, result: FirstToken | str) -> None:
        with self._lock:
            pending = self._pending.pop(room, None)
        if pending is None:
            return
        self.aux.free(pending.slot)
        if isinstance(result, str):
            log.warning("room %s failed: %s", room, result)
        self._count(not isinstance(result, str))
        pending.done(result)

    def _count(self, ok: bool, *, bootstrap: bool = False) -> None:
        """/metrics: one room's KV arrived, or did not (BOOTSTRAP: before the prefill was even asked)."""
        metrics = self.ctx.metrics
        if metrics is not None:
            if ok:
                metrics.transfer_done()
            else:
                metrics.transfer_failed(bootstrap=bootstrap)

    def _complete(self, pending: _Pending) -> None:
        try:
            blob = self.aux.view(pending.slot).tobytes()
            token, logprob, top = decode_aux(blob)
            cached = aux_cached_tokens(blob)
        except ValueError as exc:
            self._finish(pending.room, str(exc))
            return
        if self.corruptor is not None and pending.kv is not None:
            self.corruptor.after_transfer(pending.kv, pending.saved)
        self._finish(pending.room, PDFirstToken(token, logprob, top, cached))

    def _receive_loop(self) -> None:
        while not self._stop.is_set():
            got = False
            for d, backend in enumerate(self.backends):
                try:
                    notes = backend.poll()
                except Exception:  # a library hiccup must not kill the receiver
                    log.exception("polling rank %d failed", d)
                    notes = []
                for note in notes:
                    got = True
                    self._on_note(d, note.message.decode("utf-8", "replace"))
            now = time.monotonic()
            with self._lock:
                late = [p for p in self._pending.values()
                        if now > self.clock.deadline(p.room, p.started, self.timeout) and not p.giving_up]
                for p in late:
                    p.giving_up = True
            for p in late:
                message = (
                    f"KV transfer for bootstrap_room {p.room} timed out after {self.timeout:g}s "
                    f"without progress (got {len(p.got)} of {len(p.expected)} parts from prefill {p.addr})"
                )
                try:
                    self._pool.submit(self._give_up, p, message)
                except RuntimeError:  # shutting down
                    self._finish(p.room, message)
            if got:
                continue
            if self._pending:
                time.sleep(0.001)
            else:  # idle: sleep until a room is pending (a late error note for a finished room can wait)
                self._work.clear()
                if not self._pending:
                    self._work.wait(1.0)

    def _on_note(self, d: int, text: str) -> None:
        parts = text.split(" ", 4)
        if len(parts) < 4 or parts[0] != "kv":
            return
        try:
            room, p, status = int(parts[1]), int(parts[2]), parts[3]
        except ValueError:  # a malformed note must not kill the receiver (it also enforces the timeouts)
            log.warning("ignored malformed KV notification %r", text[:200])
            return
        if status != "ok":
            self._finish(room, parts[4] if len(parts) > 4 else "prefill reported a failed transfer")
            return
        with self._lock:
            pending = self._pending.get(room)
            if pending is None:
                return
            pending.got.add((p, d))
            complete = pending.expected <= pending.got
        if complete:
            self._complete(pending)

    def _watchdog_loop(self) -> None:
        """Heartbeat every prefill that rooms wait on: a confirmed room gets a fresh deadline, a slow answer
        changes nothing, and a prefill whose port refuses connections twice in a row fails its rooms now."""
        health: dict[str, PeerHealth] = {}
        while not self._stop.wait(1.0):
            held = self.ctx.live_rooms()  # every room decode holds, queued ones too: the prefill waits for them
            with self._lock:
                addrs = {p.addr for p in self._pending.values()}
                held |= set(self._pending)
            if held:
                with self._reg_lock:
                    addrs |= set(self._registered)
            if not addrs:
                health.clear()
                continue
            rooms = sorted(held)
            for addr in addrs:
                answer = bootstrap.liveness(addr, rooms, self.decode_id)
                peer = health.setdefault(addr, PeerHealth())
                if isinstance(answer, dict):
                    peer.record("ok")
                    self.clock.touch([int(r) for r in answer.get("held", [])])
                    continue
                if not peer.record(answer):
                    if answer == "slow" and peer.slow % 5 == 1:
                        log.warning("prefill %s is slow to answer its heartbeat (%d in a row); rooms keep waiting",
                                    addr, peer.slow)
                    continue
                health.pop(addr, None)
                with self._lock:
                    gone = [p.room for p in self._pending.values() if p.addr == addr]
                for room in gone:
                    self._finish(
                        room,
                        f"prefill server at {addr} is unreachable (its bootstrap port refuses connections: the "
                        "process is gone): the KV transfer was aborted",
                    )
                with self._reg_lock:
                    self._registered.pop(addr, None)
