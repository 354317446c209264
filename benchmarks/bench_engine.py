"""Reference engine throughput on the default checkpoint: prefill tokens/s, decode tokens/s (batch 1, 16).

Runs the real engine in-process (model, paged KV cache, scheduler thread), no HTTP, so the numbers are the
engine's own. `python -m benchmarks.bench_engine` or `make bench`.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path


def _run(engine, prompts: list[list[int]], max_new_tokens: int) -> float:
    """Submit PROMPTS together, wait for all, return wall seconds."""
    from pdctl.reference.request import GenRequest
    from pdctl.reference.sampling import SamplingParams

    events = []
    start = time.perf_counter()
    for i, ids in enumerate(prompts):
        ev = threading.Event()
        req = GenRequest(rid=f"b{i}", input_ids=ids, sampling=SamplingParams(max_new_tokens=max_new_tokens,
                         temperature=0.0, ignore_eos=True), on_done=lambda r, e=ev: e.set())
        events.append(ev)
        engine.scheduler.submit(req)
    for ev in events:
        if not ev.wait(600):
            raise TimeoutError("benchmark request did not finish in 600 s")
    return time.perf_counter() - start


def main() -> int:
    """Print prefill and decode throughput; returns 0."""
    from pdctl.reference.args import parse_args
    from pdctl.reference.checkpoint import init_checkpoint
    from pdctl.reference.engine import build_engine

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = init_checkpoint(Path(tmp) / "reference-tiny", seed=0)
        for tp in (1, 2):
            engine = build_engine(parse_args(["--model-path", str(ckpt), "--tp", str(tp), "--disable-radix-cache",
                                              "--max-total-tokens", "32768"]))
            engine.scheduler.start()
            try:
                _run(engine, [[256] + [65] * 31], 2)  # warm-up
                plen = 1024
                prompts = [[256] + [(7 * i + j) % 256 for j in range(plen - 1)] for i in range(4)]
                secs = _run(engine, prompts, 1)
                print(f"tp{tp} prefill: {4 * plen / secs:10.0f} tok/s  (4 prompts x {plen} tokens, {secs:.2f} s)")
                for batch in (1, 16):
                    n = 64
                    prompts = [[256] + [(3 * i + j) % 256 for j in range(31)] for i in range(batch)]
                    base = _run(engine, prompts, 1)
                    secs = _run(engine, prompts, n + 1) - base
                    print(f"tp{tp} decode batch {batch:2d}: {batch * n / secs:10.0f} tok/s  ({n} steps, {secs:.2f} s)")
            finally:
                engine.scheduler.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
