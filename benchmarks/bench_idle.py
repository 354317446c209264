"""What an idle PD deployment costs, and what a transfer costs when work arrives: NIXL with and without its own
progress thread, side by side in one run.

The deployment is configs/local-cpu.yaml's shape (prefill TP2 -> decode TP1 over NIXL, the real sglang-router).
For each setting — "before" (PDCTL_NIXL_PROGRESS_THREAD=1: NIXL's progress thread, which spins) and "after"
(pdctl's default: no progress thread; UCX progresses inside the writer's wait and the receiver's poll) — it
starts the deployment, lets it settle, then measures:
- idle CPU: CPU-seconds each process uses over IDLE_S seconds with no request in flight, as a share of a core
  (target: < 2% per process);
- transfer latency: the wall time of sequential PD requests through the router that generate one token (so the
  time is prefill + KV transfer + decode's first step), for a short prompt and for a long one (many more
  per-token head-slice descriptors), median and p90 over ROUNDS requests. "after" must not be slower.
The two settings run one after the other on the same machine; on a shared machine compare the ratios.
Run alone: `python -m benchmarks.bench_idle`.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

IDLE_S = 10.0
ROUNDS = 30
SETTLE_S = 3.0  # after the warm-up requests, before sampling (lets one-off start-up work finish)
TARGET_IDLE_CORE_SHARE = 0.02
PROMPTS = {"short (17 tokens)": "x" * 16, "long (1025 tokens)": "y" * 1024}


def latencies(router_url: str, text: str, rounds: int, max_new_tokens: int = 1) -> list[float]:
    """Wall seconds of ROUNDS sequential greedy PD requests for TEXT, each of MAX_NEW_TOKENS tokens."""
    import requests

    body = {"text": text, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0, "ignore_eos": True}}
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        r = requests.post(router_url + "/generate", json=body, timeout=120)
        out.append(time.perf_counter() - start)
        if r.status_code != 200:
            raise RuntimeError(f"PD request failed: HTTP {r.status_code}: {r.text[:300]}")
    return out


def measure(checkpoint: Path, progress_thread: bool) -> dict:
    """Start the deployment with or without NIXL's progress thread; idle CPU and request latencies."""
    from pdctl.transfer.backends.nixl import PROGRESS_THREAD_ENV
    from tests.support.cpu import idle_share
    from tests.support.pd import start_pd

    if progress_thread:
        os.environ[PROGRESS_THREAD_ENV] = "1"
    else:
        os.environ.pop(PROGRESS_THREAD_ENV, None)
    try:
        with start_pd(checkpoint, prefill_tp=2, decode_tp=1, backend="nixl") as pd:
            for text in PROMPTS.values():  # warm-up: first transfers set up UCX endpoints
                latencies(pd.router_url, text, 3)
            time.sleep(SETTLE_S)
            pids = {"prefill": pd.prefill.proc.pid, "decode": pd.decode.proc.pid, "router": pd.router_proc.pid}
            idle = idle_share(pids, IDLE_S)
            lat = {name: latencies(pd.router_url, text, ROUNDS) for name, text in PROMPTS.items()}
    finally:
        os.environ.pop(PROGRESS_THREAD_ENV, None)
    return {"idle": idle, "latency": lat}


def _ms(values: list[float], q: float) -> float:
    return 1000 * statistics.quantiles(values, n=100)[int(q) - 1] if q != 50 else 1000 * statistics.median(values)


def main() -> int:
    """Print idle CPU per process and PD request latency for both settings; 1 when a target is missed."""
    from pdctl.reference.checkpoint import init_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        ckpt = init_checkpoint(Path(tmp) / "reference-tiny", seed=0)
        results = {"before (NIXL progress thread)": measure(ckpt, True),
                   "after (pdctl default)": measure(ckpt, False)}
    rc = 0
    print(f"idle CPU over {IDLE_S:.0f} s, share of one core per process:")
    for setting, res in results.items():
        shares = "  ".join(f"{name} {share:6.1%}" for name, share in res["idle"].items())
        print(f"  {setting:32s} {shares}")
    after = results["after (pdctl default)"]
    for name in ("prefill", "decode"):
        ok = after["idle"][name] < TARGET_IDLE_CORE_SHARE
        print(f"target: idle {name} < {TARGET_IDLE_CORE_SHARE:.0%} of a core: {'met' if ok else 'MISSED'}")
        rc = rc or (0 if ok else 1)
    print(f"PD request latency, one generated token, {ROUNDS} sequential requests (median / p90 ms):")
    before = results["before (NIXL progress thread)"]
    for prompt in PROMPTS:
        line = []
        for setting, res in results.items():
            line.append(f"{setting}: {_ms(res['latency'][prompt], 50):7.1f} / {_ms(res['latency'][prompt], 90):7.1f}")
        ratio = statistics.median(after["latency"][prompt]) / statistics.median(before["latency"][prompt])
        print(f"  {prompt:20s} " + " | ".join(line) + f" | after/before median {ratio:.2f}")
    return rc


if __name__ == "__main__":
    raise SystemExit(main())
