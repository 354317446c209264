"""What SGLang's real server costs on CPU beside pdctl's reference engine, side by side in one run.

Two PD deployments, one after the other (never two PD pairs at once on a small machine), each launched by
`pdctl launch --detach --skip-preflight` on free ports: configs/local-cpu-sglang.yaml (SGLang 0.5.23's own
launch_server, prefill TP1 -> decode TP1 over NIXL, a tiny Llama) and configs/local-cpu.yaml made the nearest
shape (the reference engine, prefill TP1 instead of its TP2, the same NIXL link and router). For each:
- start-up: wall seconds of `pdctl launch` until it returns with every server healthy and the router ready;
- RSS: resident memory of every process in the run's process groups (servers, their forks, the router);
- latency: ROUNDS sequential routed greedy generates of NEW_TOKENS tokens, median and p90;
- idle CPU: CPU-seconds of all those processes over IDLE_S seconds with no request, as a share of one core.
Then the ratios SGLang / reference. No assertion on time: on a shared machine compare the ratios.
Run alone: `python -m benchmarks.bench_sglang_cpu` (SGLang's side venv: `make sglang-env`).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from benchmarks.bench_idle import latencies

REPO = Path(__file__).resolve().parents[1]
ROUNDS = 20
NEW_TOKENS = 8
IDLE_S = 10.0
SETTLE_S = 3.0  # after the warm-up requests, before sampling idle CPU
PROMPT = "Natalia sold clips to 48 of her friends in April"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _topology(tmp: Path, config: str, model: str, **over: dict) -> Path:
    doc = yaml.safe_load((REPO / "configs" / config).read_text())
    doc["model"] = {"path": model}
    doc["transfer"]["bootstrap_port"] = _free_port()
    for section in ("prefill", "decode", "router"):
        doc[section]["port"] = _free_port()
        doc[section].update(over.get(section, {}))
    doc["router"]["metrics_port"] = _free_port()
    path = tmp / config
    path.write_text(yaml.safe_dump(doc))
    return path


def _pdctl(tmp: Path, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pdctl", *args], cwd=tmp, capture_output=True, text=True,
                          timeout=timeout, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"pdctl {args[0]} failed (exit {done.returncode}): {done.stderr[-2000:]}")
    return done


def _rss_bytes(pids: set[int]) -> int:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def measure(tmp: Path, topology: Path) -> dict:
    """Launch TOPOLOGY, measure it, bring it down."""
    from tests.support.cpu import idle_share
    from tests.support.orphans import group_pids, started_records

    run_dir = tmp / f"run-{topology.stem}"
    start = time.monotonic()
    _pdctl(tmp, "launch", str(topology), "--detach", "--skip-preflight", "--run-dir", str(run_dir), "--timeout", "600")
    startup = time.monotonic() - start
    try:
        router = json.loads((run_dir / "state.json").read_text())["router"]["url"]
        latencies(router, PROMPT, 3, 2)  # warm-up: the first transfers set up the link
        lat = latencies(router, PROMPT, ROUNDS, NEW_TOKENS)
        time.sleep(SETTLE_S)
        pids = group_pids(started_records(run_dir))
        rss = _rss_bytes(pids)
        idle = sum(idle_share({str(p): p for p in pids}, IDLE_S).values())
    finally:
        _pdctl(tmp, "down", "--run-dir", str(run_dir), timeout=300)
    return {"startup_s": startup, "rss_gib": rss / (1 << 30), "processes": len(pids),
            "p50_s": statistics.median(lat), "p90_s": statistics.quantiles(lat, n=10)[8], "idle_cores": idle}


def main() -> int:
    from pdctl.reference.checkpoint import init_checkpoint
    from pdctl.sglang_cpu.sidevenv import init_model

    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        llama = init_model(str(tmp / "tiny-llama"), "llama", 0)["path"]
        ckpt = init_checkpoint(tmp / "reference-tiny", seed=0)
        rows = {
            "SGLang 0.5.23 (real server)": measure(tmp, _topology(tmp, "local-cpu-sglang.yaml", llama)),
            "reference engine": measure(tmp, _topology(tmp, "local-cpu.yaml", str(ckpt), prefill={"tp": 1})),
        }
    print(f"PD prefill TP1 -> decode TP1 over NIXL on CPU, {os.cpu_count()} cores; {ROUNDS} sequential routed "
          f"greedy generates of {NEW_TOKENS} tokens; idle CPU over {IDLE_S:.0f} s (share of one core, all processes)")
    print(f"  {'deployment':30s} {'start-up s':>10s} {'RSS GiB':>8s} {'procs':>5s} {'p50 ms':>8s} {'p90 ms':>8s} "
          f"{'idle cores':>10s}")
    for label, r in rows.items():
        print(f"  {label:30s} {r['startup_s']:10.1f} {r['rss_gib']:8.2f} {r['processes']:5d} {1000 * r['p50_s']:8.1f} "
              f"{1000 * r['p90_s']:8.1f} {r['idle_cores']:10.2f}")
    sg, ref = rows.values()
    ratios = "  ".join(f"{key} x{sg[key] / ref[key]:.1f}" for key in ("startup_s", "rss_gib", "p50_s", "p90_s",
                                                                        "idle_cores") if ref[key])
    print(f"  SGLang / reference: {ratios}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
