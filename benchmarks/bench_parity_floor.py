"""False-alarm and detection rates of `pdctl parity` against its measured noise floor, over repeated runs.

Under `--numerics gpu-like` (reference engine): a fleet of PD candidates (prefill TP1 -> decode TP2, TP2 -> TP1,
NIXL) judged against a colocated TP1 reference (floor: a TP2 control) and a PD full-cache reference of the
same split (floor: the reference itself). Each repetition is another "GPU" and another suite: the engines'
split choices are seeded by `--random-seed` (one fleet per engine seed) and the suite's token ids by the
suite seed. Per repetition:

- clean: each candidate against each reference, cold + warm + concurrent -> a false alarm is a failing run;
- corrupted: the decode's KV test hook (swap-heads, page-shift, stale-swa, zero-layer, fp8, fp8 only past
  position 256), each candidate against each reference, cold -> a detection is a failing run;
- soak: a corruption that starts after two rounds' worth of requests, 4 rounds against the colocated reference
  -> detected when the soak fails on round 2 or later (and round 1 was clean).

It prints the rates, and the separation: each run's worst score in units of its floor (clean runs' largest
vs corrupted runs' smallest), which is what the floor factor (default 4) sits between.

    python -m benchmarks.bench_parity_floor [--engine-seeds 1] [--suite-seeds 1] [--max-prompt-tokens 300]

docs/parity.md's numbers: `--engine-seeds 2 --suite-seeds 2` (4 repetitions, 45 min on a shared 2-core machine).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from pathlib import Path

CORRUPTIONS = ("swap-heads", "page-shift", "stale-swa", "zero-layer", "fp8", "fp8,from=256")
CANDIDATES = ("p1d2-nixl", "p2d1-nixl")


def _ratio(result) -> float:
    """The run's worst score over its floor (max over modes): how far above the noise the candidate got
    (inf: a score above a floor of 0 — cold against a PD reference of the same split is exact)."""
    worst = 0.0
    for mode in result.modes.values():
        level = mode.floor.level if mode.floor is not None else 0.0
        score = mode.numbers()["worst"]
        worst = max(worst, score / level if level > 0 else (0.0 if score == 0 else float("inf")))
    return worst


def _cold(result) -> tuple[float, float]:
    """(the cold mode's worst score, its threshold)."""
    cold = result.modes["cold"]
    return cold.numbers()["worst"], cold.floor.threshold if cold.floor is not None else 0.0


def repetition(fleet, label: str, out: dict) -> None:
    """Clean, corrupted and soak runs of one repetition; results appended to OUT."""
    for cand in CANDIDATES:
        for ref in ("colocated", f"pd-{cand.split('-')[0]}"):
            result = fleet.judge(cand, ref)
            out["clean"].append((label, cand, ref, result.ok, _ratio(result)))
            out["thresholds"].append(_cold(result)[1])
            print(f"  clean {cand} vs {ref}: {'pass' if result.ok else 'FALSE ALARM'}  ratio {_ratio(result):.3g}",
                  flush=True)
            for spec in CORRUPTIONS:
                fleet.corrupt(cand, spec)
                try:
                    bad = fleet.judge(cand, ref, modes=("cold",))
                finally:
                    fleet.corrupt(cand, "none")
                out["corrupt"][spec].append((label, cand, ref, not bad.ok, _ratio(bad)))
                out["corrupt_scores"].append(_cold(bad)[0])
                print(f"  [{spec}] {cand} vs {ref}: {'detected' if not bad.ok else 'MISSED'}  ratio "
                      f"{_ratio(bad):.3g}  onset {bad.positions.get('first_divergent_position')}", flush=True)
    per_round = len(fleet.prompts) * fleet.opts.copies
    fleet.corrupt("p1d2-nixl", f"zero-layer,after={2 * per_round}")
    try:
        soak = fleet.judge("p1d2-nixl", "colocated", modes=(), soak_rounds=4).soak
    finally:
        fleet.corrupt("p1d2-nixl", "none")
    caught = not soak.ok and soak.rounds[0].unexplained == 0 and (soak.first_bad_round or 0) >= 2
    out["soak"].append((label, caught, soak.first_bad_round))
    print(f"  soak (corrupt after {2 * per_round} requests): {'caught' if caught else 'MISSED'} at round "
          f"{soak.first_bad_round}", flush=True)


def _rate(hits: int, n: int) -> str:
    return f"{hits}/{n} ({100.0 * hits / n:.0f}%)" if n else "-"


def report(out: dict) -> None:
    clean = out["clean"]
    alarms = sum(not ok for *_, ok, _ in clean)
    clean_ratios = [r for *_, r in clean]
    print("\n== parity noise floor: rates over repeated runs ==")
    print(f"false alarms (clean candidates, cold+warm+concurrent): {_rate(alarms, len(clean))}; worst/floor "
          f"ratio median {statistics.median(clean_ratios):.3g}, max {max(clean_ratios):.3g}")
    lowest = float("inf")
    for spec, runs in out["corrupt"].items():
        ratios = [r for *_, r in runs]
        lowest = min(lowest, min(ratios))
        print(f"detected [{spec}] (cold): {_rate(sum(d for *_, d, _ in runs), len(runs))}; worst/floor ratio "
              f"min {min(ratios):.3g}, median {statistics.median(ratios):.3g}")
    soaks = out["soak"]
    print(f"soak, corruption after K requests: caught {_rate(sum(c for _, c, _ in soaks), len(soaks))}; first bad "
          f"round {[r for *_, r in soaks]}")
    print(f"separation: largest clean ratio {max(clean_ratios):.3g} vs smallest corrupted ratio {lowest:.3g} "
          f"(the floor factor 4 sits between: margins {4 / max(clean_ratios):.2f}x and {lowest / 4:.2f}x)")
    print(f"in nats: smallest corrupted cold score {min(out['corrupt_scores']):.3g} vs largest cold threshold "
          f"{max(out['thresholds']):.3g}")


def main(argv: list[str] | None = None) -> int:
    from pdctl.reference.checkpoint import init_checkpoint
    from tests.support.parity_fleet import start_fleet

    parser = argparse.ArgumentParser(prog="bench_parity_floor")
    parser.add_argument("--engine-seeds", type=int, default=1)  # `make bench` runs one repetition (~11 min)
    parser.add_argument("--suite-seeds", type=int, default=1)
    parser.add_argument("--max-prompt-tokens", type=int, default=300)
    args = parser.parse_args(argv if argv is not None else [])
    out: dict = {"clean": [], "corrupt": defaultdict(list), "soak": [], "thresholds": [], "corrupt_scores": []}
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-parity-floor-") as tmp:
        checkpoint = init_checkpoint(Path(tmp) / "ckpt", seed=0)
        for engine_seed in range(args.engine_seeds):
            logs = Path(tmp) / f"logs-{engine_seed}"
            logs.mkdir()
            with start_fleet(checkpoint, logs, seed=engine_seed, max_prompt_tokens=args.max_prompt_tokens,
                             backends=("nixl",)) as fleet:
                for suite_seed in range(args.suite_seeds):
                    fleet.reseed(suite_seed)
                    label = f"engine seed {engine_seed}, suite seed {suite_seed}"
                    print(f"\n-- {label} ({len(fleet.prompts)} prompts, up to {args.max_prompt_tokens} tokens)",
                          flush=True)
                    repetition(fleet, label, out)
    report(out)
    print(f"({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    import sys

    sys.exit(main(sys.argv[1:]))
