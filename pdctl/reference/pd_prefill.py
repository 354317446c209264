"""PrefillRole: the bootstrap server, decode registrations (handshake), and writing KV + aux per room.

Flow per request (SGLang's): the router sends the same body to prefill and decode; decode posts the room's
destination pages to our bootstrap server; after the prompt forward the scheduler calls `after_prefill`, and a
worker thread waits for that room's pages, writes every local rank's heads into the paired decode ranks
(pdctl.plan addresses via pdctl.transfer.sender), rank 0 adds the aux data (first token, logprobs), each write
notifies the decode rank when its data has landed, and `done` releases our pages.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pdctl.plan import decode_peers, prefill_peers
from pdctl.reference.pd_common import AuxSlots, make_backends, pools_desc, server_info
from pdctl.reference.roles import FirstToken, KVHandle, PrefillDone, RequestInfo, RoleContext
from pdctl.transfer.bootstrap import BootstrapServer
from pdctl.transfer.handshake import handshake_problem
from pdctl.transfer.sender import AUX_SLOT_BYTES, encode_aux, full_page_pairs, rank_blocks, swa_page_pairs

log = logging.getLogger("pdctl.reference.pd")


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
        self._cond = threading.Condition()
        self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="pd-send")
        self.server: BootstrapServer | None = None

    def start(self) -> None:
        """Register every rank's pools with the backend, then open the bootstrap port."""
        self.backends = make_backends(self.ctx, "prefill")
        self.backends[0].register([self.aux.region])
        s = self.ctx.settings
        self.server = BootstrapServer(s.host, s.bootstrap_port, self.info, self._on_register, self._on_room)
        self.server.start()
        log.info("bootstrap server on %s:%d (%s)", s.host, s.bootstrap_port, s.transfer_backend)

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
        """A decode posts a room's destination pages (or an abort); workers waiting for it wake up."""
        with self._cond:
            if "abort" not in doc and doc.get("decode_id") not in self._decoders:
                return "decode server is not registered with this prefill (it restarted?): register first"
            doc["_at"] = time.monotonic()
            self._rooms[int(doc["room"])] = doc
            stale = [r for r, d in self._rooms.items() if time.monotonic() - d["_at"] > 10 * self.timeout]
            for r in stale:
                self._rooms.pop(r, None)
            self._cond.notify_all()
        return None

    # ---- the hook (engine thread) -------------------------------------------------------------------
    def after_prefill(self, req: RequestInfo, kv: KVHandle, first: FirstToken, done: PrefillDone) -> None:
        """Hand the transfer to a worker thread; the engine thread returns at once."""
        self._pool.submit(self._send_safely, req, kv, first, done)

    def _send_safely(self, req: RequestInfo, kv: KVHandle, first: FirstToken, done: PrefillDone) -> None:
        try:
            error = self._send(req, kv, first)
        except Exception as exc:  # never leave the scheduler waiting on a dead worker
            log.exception("KV send for room %s failed", req.bootstrap_room)
            error = f"{type(exc).__name__}: {exc}"
        done(error)

    def _wait_room(self, room: int) -> dict[str, Any] | str:
        deadline = time.monotonic() + self.timeout
        with self._cond:
            while room not in self._rooms:
                left = deadline - time.monotonic()
                if left <= 0:
                    return (
                        f"decode did not ask for bootstrap_room {room} within {self.timeout:g}s "
                        "(is the decode server up and reachable from the router?)"
                    )
                self._cond.wait(min(left, 0.5))
            return self._rooms.pop(room)

    def _send(self, req: RequestInfo, kv: KVHandle, first: FirstToken) -> str | None:
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
        room, d_tp, ps = int(req.bootstrap_room), int(reg["tp"]), kv.page_size
        slot = self.aux.alloc()
        try:
            return self._write_all(room, room_doc, reg, kv, first, slot, d_tp, ps)
        finally:
            self.aux.free(slot)

    def _write_all(
        self,
        room: int,
        room_doc: dict[str, Any],
        reg: dict[str, Any],
        kv: KVHandle,
        first: FirstToken,
        slot: int,
        d_tp: int,
        ps: int,
    ) -> str | None:
        import numpy as np

        blob = encode_aux(first.token_id, first.logprob, list(first.top_logprobs))
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
                try:
                    handles.append(
                        (p, peer, self.backends[p].write(peer, src, dst, lens, f"kv {room} {p} ok".encode()))
                    )
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

    def _notify_error(self, room: int, p: int, peer: str, message: str) -> None:
        """Tell the decode rank this room failed, so it answers at once instead of timing out."""
        try:
            self.backends[p].notify(peer, f"kv {room} {p} err {message}".encode())
        except Exception:  # noqa: BLE001 - best effort: decode times out on its own otherwise
            log.warning("could not notify decode about failed room %s", room)
