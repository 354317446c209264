"""Fixtures for engine tests: an in-process engine driver (no HTTP) and one shared HTTP server per module."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pdctl.reference.args import parse_args
from pdctl.reference.engine import Engine, build_engine
from pdctl.reference.request import GenRequest
from pdctl.reference.sampling import SamplingParams
from pdctl.reference.tokenizer import ByteTokenizer

TOK = ByteTokenizer()

# Prompts that cross the sliding window (32) and page edges (16) at several offsets.
EDGE_PROMPTS = [
    "The quick brown fox jumps over the lazy dog. " * 2,  # 91 tokens with BOS
    "Q: 12 + 30 = ?\nA:",  # shorter than one page
    "abcdefghijklmnopqrstuvwxyzABCDE",  # 32 tokens with BOS: exactly two pages, exactly the window
    "Paged attention keeps keys and values in fixed-size pages; sliding layers only keep a window. " * 3,
]


class InProcessEngine:
    """A real engine (model, pages, scheduler thread) driven without HTTP, for fast exactness tests."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        engine.scheduler.start()

    def generate(self, prompts: list[str] | list[list[int]], max_new_tokens: int = 24, **kw: Any) -> list[GenRequest]:
        """Submit all PROMPTS at once (they batch) and wait for every result (timeout 120 s)."""
        reqs, events = [], []
        for i, p in enumerate(prompts):
            ids = TOK.encode(p) if isinstance(p, str) else list(p)
            sp = SamplingParams(max_new_tokens=max_new_tokens, temperature=kw.get("temperature", 0.0),
                                ignore_eos=True, seed=kw.get("seed"))
            ev = threading.Event()
            req = GenRequest(rid=f"r{i}", input_ids=ids, sampling=sp, return_logprob=True,
                             logprob_start_len=kw.get("logprob_start_len", 0), top_logprobs_num=kw.get("top", 0),
                             on_done=lambda r, e=ev: e.set())
            reqs.append(req)
            events.append(ev)
            self.engine.scheduler.submit(req)
        for ev in events:
            assert ev.wait(120), "engine did not answer within 120 s"
        for r in reqs:
            assert r.error is None, r.error
        return reqs

    def close(self) -> None:
        """Stop the engine thread."""
        self.engine.scheduler.stop()


def make_engine(checkpoint: Path, *flags: str) -> InProcessEngine:
    """An in-process engine for CHECKPOINT with server FLAGS (e.g. "--tp", "2")."""
    return InProcessEngine(build_engine(parse_args(["--model-path", str(checkpoint), *flags])))


@pytest.fixture
def engine_factory(ref_checkpoint: Path) -> Iterator[Any]:
    """make(*flags) -> InProcessEngine; every engine made is stopped at teardown."""
    made: list[InProcessEngine] = []

    def make(*flags: str) -> InProcessEngine:
        e = make_engine(ref_checkpoint, *flags)
        made.append(e)
        return e

    yield make
    for e in made:
        e.close()
