"""PrefillRole: the bootstrap server, decode registrations (handshake), and writing KV + aux per room.

Flow per request (SGLang's): the router sends the same body to prefill and decode; decode posts the room's
destination pages to our bootstrap server; after the prompt forward the scheduler calls `after_prefill`, and a
worker thread waits for that room's pages, writes every local rank's heads into the paired decode ranks
(pdctl.plan addresses via pdctl.reference.roles.sender), rank 0 adds the aux data (first token, logprobs), each write
notifies the decode rank when its data has landed, and `done` releases our pages.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pdctl.plan import decode_peers, prefill_peers
from pdctl.reference.roles.base import FirstToken, KVHandle, PrefillDone, RequestInfo, RoleContext
from pdctl.reference.roles.bootstrap import BootstrapServer
from pdctl.reference.roles.common import AuxSlots, make_backends, pools_desc, server_info
from pdctl.reference.roles.handshake import handshake_problem
from pdctl.reference.roles.liveness import RoomClock
from pdctl.reference.roles.sender import (
    AUX_SLOT_BYTES,
    encode_aux,
    full_page_pairs,
    rank_blocks,
    swa_page_pairs,
)

log = logging.getLogger("pdctl.reference.roles")
ABORT_DRAIN_S = 5.0  # how long decode's abort waits for a room's in-flight writes to finish


class _Tally:
    """One request's send, for /metrics: when it entered the transfer queue, whether writing began (a
    failure before that is a bootstrap failure), and the bytes its descriptors wrote."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.writing = False
        self.nbytes = 0


class PrefillRole:
    """Prefill side of PD: owns the bootstrap server and the sending endpoints (one per rank)."""

    name = "prefill"

    def __init__(self, ctx: RoleContext) -> None:
        self.ctx = ctx
        self.info = server_info(ctx, "prefill")
        self.timeout = float(ctx.settings.transfer_timeout)
        self.backends: list[Any] = []
        self.aux = AuxSlots()
        self._decoders: dict[str, dict[str, Any]] = {}  # decode_id -> {"tp": int, "ranks": {d: reg}}
        self._rooms: dict[int, dict[str, Any]] = {}
        self._failed: dict[int, tuple[str, float]] = {}  # room -> (error, at): failed before decode asked
        self._aborted: dict[int, float] = {}  # room -> at: decode gave up; never write into its pages
        self._writing: set[int] = set()  # rooms whose writes are being issued or are in flight
        self._cond = threading.Condition()
        self.clock = RoomClock()  # when a decode's heartbeat last said it holds each room
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="pd-send")
        self.server: BootstrapServer | None = None

    def start(self) -> None:
        """Register every rank's pools with the backend, then open the bootstrap port."""
        self.backends = make_backends(self.ctx, "prefill")
        self.backends[0].register([self.aux.region])
        s = self.ctx.settings
        self.server = BootstrapServer(s.host, s.bootstrap_port, self.info, self._on_register, self._on_room,
                                      self._on_liveness)
        self.server.start()
        log.info("bootstrap server on %s:%d (%s)", s.host, self.server.port, s.transfer_backend)

    @property
    def bootstrap_port(self) -> int | None:
        """The port the bootstrap server bound (differs from the flag's when that was 0); None before start."""
        return self.server.port if self.server is not None else None

    def shutdown(self) -> None:
        """Close the bootstrap server, fail nothing new, release the endpoints."""
        if self.server is not None:
            self.server.stop()
        self._pool.shutdown(wait=False, cancel_futures=True)
        for backend in self.backends:
            backend.close()

    # ---- bootstrap handlers (HTTP threads) ----------------------------------------------------------
    def _on_register(self, doc: dict[str, Any]) -> str | None:
        """A decode rank registers: run the handshake, then load its endpoint into our paired ranks."""
        problem = handshake_problem(self.info, doc["info"])
        if problem:
            log.warning("rejected decode %s rank %s: %s", doc.get("decode_id"), doc.get("rank"), problem)
            return problem
        d_tp, rank = int(doc["info"]["tp_size"]), int(doc["rank"])
        peers = {p: self.backends[p].connect(doc["metadata"]) for p in prefill_peers(self.ctx.tp, d_tp, rank)}
        with self._cond:
            entry = self._decoders.setdefault(doc["decode_id"], {"tp": d_tp, "ranks": {}})
            entry["ranks"][rank] = {"pools": doc["pools"], "peers": peers, "aux": doc.get("aux")}
        log.info("decode %s rank %d/%d registered", doc["decode_id"], rank, d_tp)
        return None

    def _on_room(self, doc: dict[str, Any]) -> str | None:
        """A decode posts a room's destination pages (or an abort); workers waiting for it wake up.

        A room that already failed here answers with that error (decode fails the request at once). An
        abort returns only when no write for the room is in flight any more (bounded by ABORT_DRAIN_S), so
        decode may free the room's pages after this call without a late write landing in them.
        """
        room, now = int(doc["room"]), time.monotonic()
        with self._cond:
            if "abort" not in doc and doc.get("decode_id") not in self._decoders:
                return "decode server is not registered with this prefill (it restarted?): register first"
            self._drop_stale(now)
            if "abort" not in doc and room in self._failed:
                return self._failed.pop(room)[0]
            doc["_at"] = now
            self._rooms[room] = doc
            self._cond.notify_all()
            if "abort" in doc:
                self._aborted[room] = now
                deadline = now + ABORT_DRAIN_S
                while room in self._writing and time.monotonic() < deadline:
                    self._cond.wait(0.05)
                if room in self._writing:
                    log.warning("room %s aborted by decode while its write is still in flight", room)
        return None

    def _on_liveness(self, doc: dict[str, Any]) -> dict[str, Any]:
        """A decode's heartbeat: it holds ROOMS (each gets a fresh wait here); answer which of them this server
        holds a request for — queued, prefilling, waiting for decode's pages or being written (decode extends
        those). A room document decode posted is not one: it says what decode wants, not that work goes on."""
        rooms = {int(r) for r in doc.get("rooms") or []}
        self.clock.touch(rooms)
        with self._cond:
            writing = set(self._writing)
        return {"held": sorted(rooms & (writing | self.ctx.live_rooms()))}

    def _drop_stale(self, now: float) -> None:
        """Forget rooms, failures and aborts nobody will ask about any more (caller holds the lock)."""
        old = now - 10 * self.timeout
        for r in [r for r, d in self._rooms.items() if d["_at"] < old]:
            self._rooms.pop(r, None)
        for r in [r for r, (_, at) in self._failed.items() if at < old]:
            self._failed.pop(r, None)
        for r in [r for r, at in self._aborted.items() if at < old]:
            self._aborted.pop(r, None)
        self.clock.forget_older_than(old)

    def abort_request(self, req: RequestInfo, message: str) -> None:
        """Engine thread: REQ failed before its transfer began (rejected, OOM): fail decode's room now.

        Decode either asked already (its room document is here: notify its ranks) or will ask soon (its
        /room post is answered with MESSAGE) — instead of waiting out --transfer-timeout.
        """
        if req.bootstrap_room is None:
            return
        room = int(req.bootstrap_room)
        with self._cond:
            doc = self._rooms.pop(room, None)
            if doc is None or "abort" in doc:
                if doc is None:
                    self._failed[room] = (message, time.monotonic())
                return
        try:
            self._pool.submit(self._notify_room, room, doc, message)
        except RuntimeError:  # shutting down: decode's watchdog reports the dead prefill
            pass

    def _notify_room(self, room: int, room_doc: dict[str, Any], message: str) -> None:
        """Send an error notification for ROOM to one rank of the decode that asked (one is enough)."""
        with self._cond:
            reg = self._decoders.get(room_doc.get("decode_id", ""))
        for dreg in (reg or {}).get("ranks", {}).values():
            for p, peer in dreg["peers"].items():
                if self._notify_error(room, p, peer, message):
                    return
        log.warning("could not tell decode that room %s failed: %s", room, message)

    # ---- the hook (engine thread) -------------------------------------------------------------------
    def after_prefill(self, req: RequestInfo, kv: KVHandle, first: FirstToken, done: PrefillDone) -> None:
        """Hand the transfer to a worker thread; the engine thread returns at once."""
        self._pool.submit(self._send_safely, req, kv, first, done, _Tally())  # the clock starts at queue entry

    def _send_safely(self, req: RequestInfo, kv: KVHandle, first: FirstToken, done: PrefillDone,
                     tally: _Tally) -> None:
        try:
            error = self._send(req, kv, first, tally)
        except Exception as exc:  # never leave the scheduler waiting on a dead worker
            log.exception("KV send for room %s failed", req.bootstrap_room)
            error = f"{type(exc).__name__}: {exc}"
        metrics = self.ctx.metrics
        if metrics is not None:
            if error is None:
                metrics.transfer_done(tally.nbytes, time.monotonic() - tally.start)
            else:  # decode never asked for the room (or we are not paired): a bootstrap failure, as in SGLang
                metrics.transfer_failed(bootstrap=not tally.writing)
        done(error)

    def _wait_room(self, room: int) -> dict[str, Any] | str:
        """Wait for decode's pages for ROOM: --transfer-timeout after the start or after decode's heartbeat
        last said it holds the room (a decode with a long queue is slow, not gone)."""
        start = time.monotonic()
        with self._cond:
            while room not in self._rooms:
                left = self.clock.deadline(room, start, self.timeout) - time.monotonic()
                if left <= 0:
                    return (
                        f"decode did not ask for bootstrap_room {room} within {self.timeout:g}s "
                        "(is the decode server up and reachable from the router?)"
                    )
                self._cond.wait(min(left, 0.5))
            return self._rooms.pop(room)

    def _send(self, req: RequestInfo, kv: KVHandle, first: FirstToken, tally: _Tally) -> str | None:
        """Write this request's KV to every paired decode rank; returns an error message or None."""
        if req.bootstrap_room is None:
            return "prefill request without bootstrap_room: send PD requests through the PD router"
        room_doc = self._wait_room(int(req.bootstrap_room))
        if isinstance(room_doc, str):
            return room_doc
        if "abort" in room_doc:
            return str(room_doc["abort"])
        with self._cond:
            reg = self._decoders.get(room_doc["decode_id"])
        if reg is None:
            return "decode server is not registered with this prefill"
        room = int(req.bootstrap_room)
        slot = self.aux.alloc()
        with self._cond:
            self._writing.add(room)
        tally.writing = True
        try:
            return self._write_all(room, room_doc, reg, kv, first, slot, tally)
        except Exception as exc:
            log.exception("KV send for room %s failed", room)
            message = f"{type(exc).__name__}: {exc}"
            self._notify_room(room, room_doc, message)
            return message
        finally:
            with self._cond:
                self._writing.discard(room)
                self._cond.notify_all()
            self.aux.free(slot)

    def _aborted_msg(self, room: int) -> str | None:
        """The error for a room decode has given up on (checked right before every write), or None."""
        with self._cond:
            if room in self._aborted:
                return f"decode aborted bootstrap_room {room} (it gave up waiting): KV write skipped"
        return None

    def _write_all(
        self,
        room: int,
        room_doc: dict[str, Any],
        reg: dict[str, Any],
        kv: KVHandle,
        first: FirstToken,
        slot: int,
        tally: _Tally,
    ) -> str | None:
        """Issue every rank pair's write (KV pages, plus the aux slot from rank 0 to decode rank 0), then
        wait for all; the first failure is reported to decode and returned."""
        d_tp, ps = int(reg["tp"]), kv.page_size
        aborted = self._aborted_msg(room)
        if aborted:
            return aborted
        blob = encode_aux(first.token_id, first.logprob, list(first.top_logprobs), kv.cached_len)
        self.aux.view(slot)[: len(blob)] = np.frombuffer(blob, dtype=np.uint8)
        handles = []
        ctx = self.ctx
        for p in range(ctx.tp):
            src_pools = pools_desc(ctx.kv.ranks[p])
            for d in decode_peers(ctx.tp, d_tp, p):
                dreg, droom = reg["ranks"].get(d), room_doc["ranks"][d]
                if dreg is None:
                    return f"decode rank {d} never registered"
                pages = {
                    "full": full_page_pairs(
                        kv.ranks[p].full_pages, droom["full_pages"], room_doc["cached_len"], ps
                    ),
                    "swa": swa_page_pairs(
                        kv.swa_first_page,
                        kv.ranks[p].swa_pages,
                        room_doc["swa_first_page"],
                        droom["swa_pages"],
                    ),
                }
                src, dst, lens = rank_blocks(
                    src_pools=src_pools,
                    dst_pools=dreg["pools"],
                    pages=pages,
                    page_size=ps,
                    src_tp=ctx.tp,
                    src_rank=p,
                    dst_tp=d_tp,
                    dst_rank=d,
                    kv_heads=ctx.model.num_key_value_heads,
                )
                if p == 0 and d == 0 and room_doc.get("aux_addr") is not None:
                    src = np.append(src, np.uint64(self.aux.addr(slot)))
                    dst = np.append(dst, np.uint64(room_doc["aux_addr"]))
                    lens = np.append(lens, np.uint64(AUX_SLOT_BYTES))
                peer = dreg["peers"][p]
                aborted = self._aborted_msg(room)
                if aborted:  # checked right before issuing: the decode pages may already be reused
                    return aborted
                try:
                    handles.append(
                        (p, peer, self.backends[p].write(peer, src, dst, lens, f"kv {room} {p} ok".encode()))
                    )
                    tally.nbytes += int(lens.sum())
                except Exception as exc:  # noqa: BLE001 - any failure is reported to decode and the request
                    self._notify_error(room, p, peer, str(exc))
                    return str(exc)
        for p, peer, handle in handles:
            try:
                self.backends[p].wait(handle, self.timeout)
            except Exception as exc:  # noqa: BLE001 - any failure is reported to decode and the request
                self._notify_error(room, p, peer, str(exc))
                return str(exc)
        return None

    def _notify_error(self, room: int, p: int, peer: str, message: str) -> bool:
        """Tell the decode rank this room failed, so it answers at once instead of timing out."""
        try:
            self.backends[p].notify(peer, f"kv {room} {p} err {message}".encode())
            return True
        except Exception:  # noqa: BLE001 - best effort: decode times out on its own otherwise
            log.warning("could not notify decode about failed room %s", room)
            return False
