"""The PD plug-in contract, exercised by an in-process loopback transfer (same-TP page copies).

Not a mock: the loopback roles move real KV pages between two real engines exactly as the contract in
roles.py describes (pages, SWA window, first token, done callbacks); the network transfer itself is the
transfer helper's (pd*.py) and is tested there.
"""

from __future__ import annotations

import threading

import pytest

from pdctl.reference.args import parse_args
from pdctl.reference.engine import build_engine
from tests.support.inprocess import EDGE_PROMPTS, TOK, InProcessEngine


class Exchange:
    """Rooms published by the prefill role, awaited by the decode role."""

    def __init__(self) -> None:
        self.rooms: dict[int, tuple] = {}
        self.cond = threading.Condition()


class LoopPrefill:
    name = "prefill"

    def __init__(self, ex: Exchange, kv) -> None:
        self.ex, self.kv = ex, kv

    def start(self) -> None: ...
    def shutdown(self) -> None: ...

    def after_prefill(self, req, kv, first, done) -> None:
        with self.ex.cond:
            self.ex.rooms[req.bootstrap_room] = (self.kv, kv, first, done)
            self.ex.cond.notify_all()


class LoopDecode:
    name = "decode"

    def __init__(self, ex: Exchange, kv, fail: str | None = None) -> None:
        self.ex, self.kv, self.fail = ex, kv, fail

    def start(self) -> None: ...
    def shutdown(self) -> None: ...

    def before_decode(self, req, kv, done) -> None:
        threading.Thread(target=self._receive, args=(req, kv, done), daemon=True).start()

    def _receive(self, req, kv, done) -> None:
        if self.fail:
            done(self.fail)
            return
        with self.ex.cond:
            if not self.ex.cond.wait_for(lambda: req.bootstrap_room in self.ex.rooms, timeout=30):
                done("timed out waiting for prefill")
                return
            src_kv, skv, first, prefill_done = self.ex.rooms.pop(req.bootstrap_room)
        for src_rank, dst_rank, s, d in zip(src_kv.ranks, self.kv.ranks, skv.ranks, kv.ranks):
            for sp, dp in zip(s.full_pages, d.full_pages):
                dst_rank.full.buffer[:, :, dp] = src_rank.full.buffer[:, :, sp]
            if dst_rank.swa is not None:
                src_by_logical = {skv.swa_first_page + i: p for i, p in enumerate(s.swa_pages)}
                for j, dp in enumerate(d.swa_pages):
                    dst_rank.swa.buffer[:, :, dp] = src_rank.swa.buffer[:, :, src_by_logical[kv.swa_first_page + j]]
        prefill_done(None)
        done(first)


def _engine(ckpt, role_factory, *flags) -> InProcessEngine:
    eng = build_engine(parse_args(["--model-path", str(ckpt), *flags]))
    role = role_factory(eng.kv)
    eng.role = role
    eng.scheduler.role = role
    return InProcessEngine(eng)


def _pd_generate(prefill: InProcessEngine, decode: InProcessEngine, prompts, n: int, lsl: int):
    results = {}
    rooms = [1000 + i for i in range(len(prompts))]

    def run(name, eng):
        from pdctl.reference.request import GenRequest
        from pdctl.reference.sampling import SamplingParams

        evs, reqs = [], []
        for p, room in zip(prompts, rooms):
            ev = threading.Event()
            r = GenRequest(rid=f"{name}{room}", input_ids=TOK.encode(p), bootstrap_room=room, return_logprob=True,
                           logprob_start_len=lsl, sampling=SamplingParams(max_new_tokens=n, temperature=0,
                           ignore_eos=True), on_done=lambda _r, e=ev: e.set())
            reqs.append(r)
            evs.append(ev)
            eng.engine.scheduler.submit(r)
        for ev in evs:
            assert ev.wait(60)
        results[name] = reqs

    threads = [threading.Thread(target=run, args=a) for a in (("p", prefill), ("d", decode))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    return results["p"], results["d"]


@pytest.mark.parametrize("tp", ["1", "2"])
def test_loopback_pd_equals_colocated(ref_checkpoint, engine_factory, tp):
    colo = engine_factory("--tp", tp).generate(EDGE_PROMPTS, max_new_tokens=30)
    ex = Exchange()
    prefill = _engine(ref_checkpoint, lambda kv: LoopPrefill(ex, kv), "--tp", tp, "--role", "colocated")
    decode = _engine(ref_checkpoint, lambda kv: LoopDecode(ex, kv), "--tp", tp, "--disable-radix-cache")
    try:
        for lsl in (0, -1):  # second round (no input logprobs): prefill serves prompts from its prefix cache
            pre, dec = _pd_generate(prefill, decode, EDGE_PROMPTS, 30, lsl)
            for c, p, d in zip(colo, pre, dec):
                assert p.error is None and d.error is None, (p.error, d.error)
                assert p.output_ids == [c.output_ids[0]]
                assert p.input_logprobs == (c.input_logprobs if lsl == 0 else [])
                assert d.output_ids == c.output_ids and d.output_logprobs == c.output_logprobs
        assert pre[0].cached_tokens > 0
        kv = decode.engine.kv
        assert kv.full_alloc.free_pages == kv.full_alloc.usable_pages  # decode released every page
        assert kv.swa_alloc.free_pages == kv.swa_alloc.usable_pages
    finally:
        prefill.close()
        decode.close()


def test_decode_role_failure_is_a_fast_error(ref_checkpoint):
    decode = _engine(ref_checkpoint, lambda kv: LoopDecode(Exchange(), kv, fail="handshake rejected: page size"),
                     "--role", "colocated")
    try:
        from pdctl.reference.request import GenRequest
        from pdctl.reference.sampling import SamplingParams

        ev = threading.Event()
        r = GenRequest(rid="x", input_ids=TOK.encode("hello"), sampling=SamplingParams(max_new_tokens=4),
                       on_done=lambda _r: ev.set())
        decode.engine.scheduler.submit(r)
        assert ev.wait(10)
        assert r.error == "KV transfer failed: handshake rejected: page size"
        assert decode.engine.kv.full_alloc.free_pages == decode.engine.kv.full_alloc.usable_pages
    finally:
        decode.close()


def test_decode_server_retracts_and_recomputes_instead_of_failing(ref_checkpoint, engine_factory):
    """A decode server whose pool cannot hold every request's whole output retracts some mid-decode and
    re-queues them (their KV is recomputed locally) instead of failing them: every answer equals colocated."""
    prompts = [f"decode pressure {i}: " for i in range(6)]
    colo = engine_factory().generate(prompts, max_new_tokens=100)
    ex = Exchange()
    prefill = _engine(ref_checkpoint, lambda kv: LoopPrefill(ex, kv), "--role", "colocated")
    decode = _engine(ref_checkpoint, lambda kv: LoopDecode(ex, kv), "--disable-radix-cache",
                     "--max-total-tokens", "320")
    try:
        _, dec = _pd_generate(prefill, decode, prompts, 100, -1)
        assert all(d.error is None for d in dec), [d.error for d in dec]
        assert decode.engine.scheduler.stats()["num_retracted_reqs"] > 0
        assert [d.output_ids for d in dec] == [c.output_ids for c in colo]
        kv = decode.engine.kv
        assert kv.full_alloc.free_pages == kv.full_alloc.usable_pages
    finally:
        prefill.close()
        decode.close()
