"""A fleet for parity's noise-floor tests and benchmark: references, a TP2 control and PD candidates, all
reference-engine servers under `--numerics gpu-like`, started at once; each reference's baseline (its cold
answers and every mode's floor) measured once and reused for every candidate judged against it.

    with start_fleet(ref_checkpoint, log_dir) as fleet:
        result = fleet.judge("p2d1-nixl", "colocated")          # cold + warm + concurrent
        fleet.corrupt("p2d1-nixl", "fp8,from=256")               # the decode's KV test hook (armed: nixl ones)

Names: references "colocated" (TP1) and "pd-p1d2" / "pd-p2d1" (PD full-cache, `--disable-hybrid-swa-memory`);
candidates "<split>-<backend>" for split p1d2 (prefill TP1 -> decode TP2) and p2d1, backends nixl (decode hook
armed, spec "none") and mooncake (no hook). The colocated TP1 reference and the TP2 control are also behind a
real sglang-router in regular mode each (`fleet.routers["colocated"]`, `["tp2"]`: what `pdctl launch` starts for a
`mode: colocated` topology), for parity given router URLs only (`fleet.run(ParityRequest(...))`, the CLI's path).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import requests

from pdctl.parity.positions import analyze
from pdctl.parity.results import ParityResult
from pdctl.parity.runner import Baseline, Control, ParityOptions, measure_baseline, run_parity
from pdctl.parity.session import ParityRequest, build_prompts, candidate_target, gather_facts, run_request
from pdctl.target import target_from_url
from tests.support.pd import PairSpec, start_pd_pairs_and_servers, start_routers, wait_routable

SPLITS = {"p1d2": (1, 2), "p2d1": (2, 1)}
HOOK_ENV = {"PDCTL_ENABLE_TEST_HOOKS": "1"}
ARMED = ("--test-hook-corrupt-kv", "none")
ALL = ("cold", "warm", "concurrent")
WINDOW = 32  # the reference checkpoint's sliding window


def gpu_like(seed: int = 0) -> tuple[str, ...]:
    """Every server's flags: GPU-like numerics (split choices seeded by SEED), 48-token prefill chunks."""
    return ("--numerics", "gpu-like", "--random-seed", str(seed), "--chunked-prefill-size", "48")


def fleet_pairs(seed: int, backends: tuple[str, ...]) -> dict[str, PairSpec]:
    args = gpu_like(seed)
    pairs = {f"pd-{s}": PairSpec(p, d, "nixl", both_args=args + ("--disable-hybrid-swa-memory",))
             for s, (p, d) in SPLITS.items()}
    for split, (p, d) in SPLITS.items():
        for backend in backends:
            armed = backend == "nixl"
            pairs[f"{split}-{backend}"] = PairSpec(p, d, backend, both_args=args, decode_args=ARMED if armed else (),
                                                   decode_env=HOOK_ENV if armed else None)
    return pairs


class Fleet:
    """The servers, the suite, and each reference's measured baseline (measured on first use)."""

    def __init__(self, pd: dict[str, Any], colocated: Any, tp2: Any, *, max_prompt_tokens: int, suite_seed: int = 0,
                 copies: int = 2, routers: dict[str, str] | None = None) -> None:
        self.pd, self.colocated, self.tp2 = pd, colocated, tp2
        self.routers = dict(routers or {})
        self.request_baselines: dict[tuple[str, ...], Baseline] = {}  # run()'s, by reference and control URLs
        self.references = {"colocated": target_from_url(colocated.url)}
        self.references.update({f"pd-{s}": self.target(f"pd-{s}") for s in SPLITS})
        self.max_prompt_tokens = max_prompt_tokens
        self.opts = ParityOptions(modes=ALL, max_new_tokens=32, copies=copies, page_size=16, vocab_size=258)
        self.reseed(suite_seed)

    def reseed(self, suite_seed: int) -> None:
        """Another suite (other token ids): the baselines are measured again on first use."""
        req = ParityRequest(candidate_url=self.pd["p2d1-nixl"].router_url, reference_url=self.colocated.url, max_new_tokens=32,
                            max_prompt_tokens=self.max_prompt_tokens, seed=suite_seed)
        self.prompts = build_prompts(req, gather_facts(self.target("p2d1-nixl"), self.references["colocated"], req))
        self._baselines: dict[str, Baseline] = {}

    def target(self, name: str):
        return candidate_target(ParityRequest(candidate_url=self.pd[name].router_url))

    def controls(self, reference: str) -> list[Control]:
        return [Control("tp2 control", target_from_url(self.tp2.url))] if reference == "colocated" else []

    def baseline(self, reference: str) -> Baseline:
        if reference not in self._baselines:
            self._baselines[reference] = measure_baseline(self.references[reference], self.prompts, self.opts,
                                                          tp_controls=self.controls(reference))
        return self._baselines[reference]

    def judge(self, candidate: str, reference: str, modes: tuple[str, ...] = ALL, **soak: Any) -> ParityResult:
        """One parity run of CANDIDATE against REFERENCE (its baseline measured once), as the CLI judges it."""
        opts = replace(self.opts, modes=modes, **soak)
        result = run_parity(self.target(candidate), self.references[reference], self.prompts, opts,
                            tp_controls=self.controls(reference), baseline=self.baseline(reference))
        result.positions = analyze(result.modes, window=WINDOW, factor=opts.factor, max_new_tokens=opts.max_new_tokens)
        return result

    def run(self, req: ParityRequest) -> ParityResult:
        """One parity run as the CLI does it from REQ (targets resolved from URLs, TP splits discovered, TP controls
        found or started, calibration) — each reference's baseline measured once (run_request's BASELINES)."""
        req = replace(req, max_prompt_tokens=self.max_prompt_tokens, copies=self.opts.copies)
        return run_request(req, baselines=self.request_baselines)

    def corrupt(self, candidate: str, spec: str) -> None:
        """Switch the decode's KV test hook of CANDIDATE (an armed, nixl one) to SPEC."""
        url = self.pd[candidate].decode_url + "/test_hook/corrupt_kv"
        requests.post(url, json={"spec": spec}, timeout=30).raise_for_status()


@contextmanager
def start_fleet(checkpoint: str | Path, log_dir: str | Path, *, seed: int = 0, max_prompt_tokens: int = 300,
                backends: tuple[str, ...] = ("nixl", "mooncake"), copies: int = 2) -> Iterator[Fleet]:
    """Every server of the fleet started at once (torn down after); the Fleet once all are routable."""
    args = list(gpu_like(seed))
    with start_pd_pairs_and_servers(checkpoint, fleet_pairs(seed, backends),
                                    [("colocated", 1, args), ("colocated", 2, args)], log_dir=log_dir) as (pd, refs):
        colocated, tp2 = refs
        with start_routers([(colocated.url, None, None), (tp2.url, None, None)], log_dir=log_dir) as routers:
            for url, proc, _ in routers:
                wait_routable(url, 120, proc)
            yield Fleet(pd, colocated, tp2, max_prompt_tokens=max_prompt_tokens, copies=copies,
                        routers={"colocated": routers[0][0], "tp2": routers[1][0]})
