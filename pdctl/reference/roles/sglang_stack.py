"""The reference engine's PD roles on SGLang's own transfer stack (`transfer.stack: sglang`,
`python -m pdctl.reference ... --transfer-stack sglang`), in SGLang's interpreter.

The engine's KV pools (every rank's full and SWA pools, pdctl.reference.kvcache) are registered with SGLang's
KV managers — one per rank, as one per GPU — through KVArgs filled the way SGLang's schedulers fill them; the
prefill runs SGLang's bootstrap server on its bootstrap port; each request's KV and first token travel
through SGLang's KVSender / KVReceiver and SGLang's metadata (aux) buffers. The router, the HTTP API, the
scheduler and the model stay pdctl's: the roles plug into the same protocol (pdctl.reference.roles.base) as
pdctl's own PD roles.

One thread per role steps every request in flight (pdctl.sglang_stack.flows), as SGLang's scheduler
loop polls its senders and receivers; it sleeps when none is. Failures are answered with SGLang's message
and the stage; SGLang's own timeouts are the engine's --transfer-timeout.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from pdctl.reference.roles.base import DecodeDone, FirstToken, KVHandle, PrefillDone, RequestInfo, RoleContext
from pdctl.reference.roles.common import PDFirstToken, advertised_host
from pdctl.sglang import messages
from pdctl.sglang_stack import runtime
from pdctl.sglang_stack.flows import RankRequest, ReceiveFlow, SendFlow, StackFailure, kv_classes
from pdctl.sglang_stack.kvargs import kv_args
from pdctl.sglang_stack.spec import SideSpec

log = logging.getLogger("pdctl.reference.roles")
AUX_SLOTS = 256
MAX_TOP_LOGPROBS = 128  # SGLang's MetadataBuffers default (top_logprobs_num above it is refused in PD)


class _Stepper:
    """One thread that builds and steps every flow in flight (SGLang's calls are made from it only)."""

    def __init__(self, name: str) -> None:
        self.items: list[tuple[Callable[[], Any], Callable[[Any], None], Callable[[StackFailure], None]]] = []
        self.flows: list[tuple[Any, Callable[[Any], None], Callable[[StackFailure], None]]] = []
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)
        self.thread.start()

    def add(self, build: Callable[[], Any], ok: Callable[[Any], None], fail: Callable[[StackFailure], None]) -> None:
        with self.lock:
            self.items.append((build, ok, fail))
        self.wake.set()

    def _run(self) -> None:
        while not self.stop.is_set():
            with self.lock:
                new, self.items = self.items, []
            for build, ok, fail in new:
                try:
                    self.flows.append((build(), ok, fail))
                except StackFailure as exc:
                    fail(exc)
                except Exception as exc:  # noqa: BLE001 - SGLang's constructors raise their own errors
                    fail(StackFailure("first transfer", f"{type(exc).__name__}: {exc}"))
            still = []
            for flow, ok, fail in self.flows:
                try:
                    result = flow.step()
                except StackFailure as exc:
                    flow.clear()
                    fail(exc)
                    continue
                except Exception as exc:  # noqa: BLE001
                    flow.clear()
                    fail(StackFailure("first transfer", f"{type(exc).__name__}: {exc}"))
                    continue
                if result is None:
                    still.append((flow, ok, fail))
                else:
                    ok(flow)
                    flow.clear()
            self.flows = still
            if self.flows:
                time.sleep(0.001)
            else:
                self.wake.clear()
                with self.lock:
                    idle = not self.items
                if idle:
                    self.wake.wait(1.0)


class _Slots:
    """Aux (metadata) rows, one per request in flight; the same row index on every rank."""

    def __init__(self) -> None:
        self.free = list(range(AUX_SLOTS - 1, -1, -1))
        self.lock = threading.Lock()

    def alloc(self) -> int:
        with self.lock:
            if not self.free:
                raise RuntimeError("too many PD transfers in flight (no free metadata row)")
            return self.free.pop()

    def release(self, slot: int) -> None:
        with self.lock:
            self.free.append(slot)


class _StackRole:
    """What both roles share: SGLang's runtime, one KV manager per rank, metadata buffers, the stepper."""

    name = ""

    def __init__(self, ctx: RoleContext) -> None:
        self.ctx = ctx
        self.managers: list[Any] = []
        self.meta: list[Any] = []
        self.slots = _Slots()
        self.host = advertised_host(ctx.settings.host)
        self.server: Any = None
        self.port = int(ctx.settings.bootstrap_port)
        self.stepper: _Stepper | None = None

    def spec(self) -> SideSpec:
        cfg, kv, s = self.ctx.model, self.ctx.kv, self.ctx.settings
        swa = list(kv.swa_layers) if kv.hybrid_swa else []
        full = [i for i in range(cfg.num_hidden_layers) if i not in swa]
        return SideSpec(role=self.name, backend=s.transfer_backend, tp=self.ctx.tp, page_size=s.page_size,
                        tokens=1, full_layers=full, swa_layers=swa, window=cfg.sliding_window if swa else None,
                        kv_heads=cfg.num_key_value_heads, head_dim=cfg.head_dim, dtype="float32",
                        kv_cache_dtype=s.kv_cache_dtype, kv_layout=s.kv_layout, host=self.host,
                        bootstrap_host=self.host, bootstrap_port=self.port, timeout=s.transfer_timeout)

    def start(self) -> None:
        """SGLang's runtime, (prefill) its bootstrap server, then one manager per rank over the engine's pools."""
        spec = self.spec()
        runtime.prepare_env(self.host, spec.timeout)
        if spec.kv_layout != "nhd":  # SGLang builds PD transfer buffers from NHD pools only (kv-layout-pd)
            raise RuntimeError(messages.HND_DISAGG if spec.kv_layout == "hnd" else
                               f"SGLang's PD transfer assumes NHD KV rows; --kv-layout {spec.kv_layout} cannot run "
                               "on SGLang's stack")
        import torch
        from sglang.srt.disaggregation.utils import (
            DisaggregationMode,
            KVClassType,
            MetadataBuffers,
            TransferBackend,
            get_kv_class,
        )

        runtime.FAILURES.install()
        if spec.backend == "nixl":
            runtime.install_nixl_agent(host_memory=True)
        if self.name == "prefill":
            self.server, self.port = runtime.free_bootstrap_server(spec.backend, spec.bootstrap_host, self.port)
        args = runtime.server_args(spec, self.port)
        cls = get_kv_class(TransferBackend(spec.backend), KVClassType.MANAGER)
        mode = DisaggregationMode.PREFILL if self.name == "prefill" else DisaggregationMode.DECODE
        for rank in self.ctx.kv.ranks:
            runtime.publish_rank(args, rank.rank)
            if spec.backend == "mooncake":
                runtime.new_mooncake_engine()
            meta = MetadataBuffers(size=AUX_SLOTS, hidden_size=16, hidden_states_dtype=torch.float32,
                                   max_sampling_mask_tokens=1, max_top_logprobs_num=MAX_TOP_LOGPROBS)
            full = (rank.full.kv_ptrs(), rank.full.data_lens(), rank.full.item_lens())
            swa = (rank.swa.kv_ptrs(), rank.swa.data_lens(), rank.swa.item_lens()) if rank.swa is not None else None
            self.managers.append(cls(kv_args(spec, rank.rank, full, meta.get_buf_infos(), swa=swa), mode, args,
                                     False))
            self.meta.append(meta)
        self.stepper = _Stepper(f"sglang-{self.name}")
        log.info("SGLang %s stack: %d %s manager(s)%s", runtime.sglang_version(), len(self.managers), spec.backend,
                 f", bootstrap server on {self.host}:{self.port}" if self.server is not None else "")

    @property
    def bootstrap_port(self) -> int | None:
        return self.port if self.server is not None else None

    def shutdown(self) -> None:
        """Stop stepping; SGLang's managers have no safe teardown (the process exits next)."""
        if self.stepper is not None:
            self.stepper.stop.set()
            self.stepper.wake.set()
        if self.server is not None:
            self.server.close()

    def _parts(self, kv: KVHandle, slot: int, skip_pages: int = 0) -> list[RankRequest]:
        swa = self.ctx.kv.hybrid_swa and bool(self.ctx.kv.swa_layers)
        return [RankRequest(r.full_pages[skip_pages:], list(r.swa_pages) if swa else None, slot) for r in kv.ranks]

    def _slot(self, done: Callable[[Any], None]) -> int | None:
        """An aux row for a request, or None after answering it with the reason (every row in flight)."""
        try:
            return self.slots.alloc()
        except RuntimeError as exc:
            done(str(exc))
            return None

    def _failed(self, slot: int, done: Callable[[Any], None]) -> Callable[[StackFailure], None]:
        """A request's failure answer: its aux row back, /metrics, and SGLang's message with the stage."""

        def fail(exc: StackFailure) -> None:
            self.slots.release(slot)
            self._count(False, bootstrap=exc.stage != "first transfer")
            done(f"SGLang's KV transfer failed at {exc.stage}: {exc.message}")

        return fail

    def _count(self, ok: bool, nbytes: int = 0, seconds: float = 0.0, bootstrap: bool = False) -> None:
        metrics = self.ctx.metrics
        if metrics is None:
            return
        if ok:
            metrics.transfer_done(nbytes, seconds) if self.name == "prefill" else metrics.transfer_done()
        else:
            metrics.transfer_failed(bootstrap=bootstrap)


class SGLangPrefillRole(_StackRole):
    """Prefill: SGLang's bootstrap server and KVSenders; the first token rides in SGLang's aux rows."""

    name = "prefill"

    def after_prefill(self, req: RequestInfo, kv: KVHandle, first: FirstToken, done: PrefillDone) -> None:
        if req.bootstrap_room is None:
            done("prefill request without bootstrap_room: send PD requests through the PD router")
            return
        slot = self._slot(done)
        if slot is None:
            return
        for meta in self.meta:  # every prefill rank's scheduler writes its metadata row (SGLang's set_buf)
            meta.output_ids[slot, 0] = first.token_id
            meta.output_token_logprobs_val[slot, 0] = first.logprob
            meta.cached_tokens[slot, 0] = kv.cached_len
            meta.bootstrap_room[slot, 0] = int(req.bootstrap_room)
            for i, (logprob, token) in enumerate(first.top_logprobs[:MAX_TOP_LOGPROBS]):
                meta.output_top_logprobs_val[slot, i] = logprob
                meta.output_top_logprobs_idx[slot, i] = token
        addr = f"{self.host}:{self.port}"
        start = time.monotonic()
        nbytes = _request_bytes(self.ctx, kv)

        def ok(flow: Any) -> None:
            self.slots.release(slot)
            self._count(True, nbytes, time.monotonic() - start)
            done(None)

        assert self.stepper is not None
        self.stepper.add(lambda: SendFlow(self.managers, self.ctx.settings.transfer_backend, addr,
                                          int(req.bootstrap_room), self._parts(kv, slot),
                                          self.ctx.settings.transfer_timeout), ok, self._failed(slot, done))

    def before_decode(self, req: RequestInfo, kv: KVHandle, done: DecodeDone) -> None:  # pragma: no cover
        raise RuntimeError("a prefill server does not decode PD requests")

    def abort_request(self, req: RequestInfo, message: str) -> None:
        """The request failed before its transfer: SGLang's prefill aborts its sender (decode then times out
        or is told by SGLang's own failure path)."""
        if req.bootstrap_room is None or self.stepper is None:
            return
        def build() -> Any:
            sender_cls, _ = kv_classes(self.ctx.settings.transfer_backend)
            for mgr in self.managers:
                sender_cls(mgr=mgr, bootstrap_addr=f"{self.host}:{self.port}",
                           bootstrap_room=int(req.bootstrap_room)).abort()
            raise StackFailure("first transfer", message)

        self.stepper.add(build, lambda flow: None, lambda exc: None)


class SGLangDecodeRole(_StackRole):
    """Decode: SGLang's handshake with the prefill, KVReceivers into the engine's pages, the aux row."""

    name = "decode"

    def before_decode(self, req: RequestInfo, kv: KVHandle, done: DecodeDone) -> None:
        if not req.bootstrap_host or req.bootstrap_port is None or req.bootstrap_room is None:
            self._count(False, bootstrap=True)
            done("decode request without bootstrap_host/bootstrap_port/bootstrap_room: send PD requests through "
                 "the PD router")
            return
        slot = self._slot(done)
        if slot is None:
            return
        for meta in self.meta:
            meta.output_ids[slot].zero_()
            meta.bootstrap_room[slot].zero_()
        addr = f"{req.bootstrap_host}:{int(req.bootstrap_port)}"
        room = int(req.bootstrap_room)
        ps = kv.page_size
        prefix = (kv.cached_len // ps) * ps

        def ok(flow: Any) -> None:
            meta = self.meta[0]
            try:
                if int(meta.bootstrap_room[slot, 0]) != room:
                    raise ValueError(f"SGLang's aux row for bootstrap_room {room} holds room "
                                     f"{int(meta.bootstrap_room[slot, 0])}")
                top = [(float(meta.output_top_logprobs_val[slot, i]), int(meta.output_top_logprobs_idx[slot, i]))
                       for i in range(min(req.top_logprobs_num, MAX_TOP_LOGPROBS))]
                first = PDFirstToken(int(meta.output_ids[slot, 0]), float(meta.output_token_logprobs_val[slot, 0]),
                                     top, int(meta.cached_tokens[slot, 0]))
            except ValueError as exc:
                self.slots.release(slot)
                self._count(False)
                done(str(exc))
                return
            self.slots.release(slot)
            self._count(True)
            done(first)

        assert self.stepper is not None
        self.stepper.add(lambda: ReceiveFlow(self.managers, self.ctx.settings.transfer_backend, addr, room,
                                             self._parts(kv, slot, prefix // ps),
                                             self.ctx.settings.transfer_timeout, prefix), ok,
                         self._failed(slot, done))

    def after_prefill(self, req: RequestInfo, kv: KVHandle, first: FirstToken,
                      done: PrefillDone) -> None:  # pragma: no cover
        raise RuntimeError("a decode server does not prefill PD requests")

    def abort_request(self, req: RequestInfo, message: str) -> None:
        """The request failed here before its transfer; the prefill's own timeout releases its side."""


def _request_bytes(ctx: RoleContext, kv: KVHandle) -> int:
    """Bytes of one request's KV on this server (every rank, full and SWA pages), for /metrics."""
    total = 0
    for rank, pages in zip(ctx.kv.ranks, kv.ranks, strict=True):
        total += 2 * len(rank.full.layer_ids) * len(pages.full_pages) * rank.full.item_len
        if rank.swa is not None:
            total += 2 * len(rank.swa.layer_ids) * len(pages.swa_pages) * rank.swa.item_len
    return total
