"""`pdctl suggest` from checked inputs to a ranked answer: AIConfigurator's rows, the KV term, pdctl's rules.

1. every row AIConfigurator's sweep matched (pdctl.suggest.aic), the same-TP gate lifted where the SGLang
   release runs heterogeneous TP for this model;
2. per row: the KV transfer of one request (pdctl.suggest.kv) added to its TTFT, the link's load at its request
   rate, the targets -> the row's problems;
3. one candidate per deployment shape (the best row of each: the decode batch is a setting, not a shape);
4. pdctl's rules on each candidate's topology (pdctl.suggest.judge, check-compat) -> more problems;
5. ranked: candidates without problems by tokens/s per GPU (of the GPUs given), then TTFT, ITL, GPUs used;
   the rejected after them, nearest first.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pdctl.errors import UserError
from pdctl.sglang.facts import SWA_HETERO_TP_SINCE
from pdctl.sglang.versions import at_least, choose
from pdctl.suggest import aic
from pdctl.suggest.cache import Cache
from pdctl.suggest.candidate import Candidate, aic_cluster_figure, from_row
from pdctl.suggest.deployment import candidate_data
from pdctl.suggest.judge import judge
from pdctl.suggest.kv import KvModel
from pdctl.suggest.request import Inputs

Say = Callable[[str], None]

# pdctl suggest's own checks on a candidate, besides check-compat's rules: id -> what it means
CHECKS = {
    "ttft-target": "TTFT with the KV transfer is over the target",
    "itl-target": "inter-token latency is over the target",
    "kv-link-capacity": "the link cannot carry the KV bytes of the request rate the candidate promises",
    "kv-transfer": "prefill and decode attention TP do not map onto each other: no transfer exists",
    "context-parallel": "AIConfigurator's context parallelism (cp > 1) is not something pdctl renders or checks",
}
RELAXED_TTFT = 4.0  # the TTFT budget (x the target) of the second sweep that finds near misses


def hetero_tp_runs(inputs: Inputs) -> bool:
    """Whether SGLang runs prefill TP != decode TP for this model at this release: hybrid sliding-window models
    since 0.5.22 (pdctl.sglang.facts), others on every release pdctl knows (its rules judge each pair)."""
    return not inputs.spec.hybrid_swa or at_least(choose(inputs.version), SWA_HETERO_TP_SINCE)


@dataclass
class SuggestResult:
    """The answer: ranked candidates, the best (index into them, None when none is feasible), and how."""

    inputs: Inputs
    candidates: list[Candidate]
    rows: int  # AIConfigurator rows considered
    aic_meta: dict[str, Any]
    lifted: bool
    aic_answer: list[dict[str, Any]] | None = None
    warnings: dict[tuple[Any, ...], list[dict[str, str]]] = field(default_factory=dict)

    @property
    def best(self) -> int | None:
        return 0 if self.candidates and self.candidates[0].ok else None

    @property
    def ok(self) -> bool:
        return self.best is not None

    def nearest_misses(self, k: int = 5) -> list[Candidate]:
        return [c for c in self.candidates if not c.ok][:k]

    def document(self) -> dict[str, Any]:
        meta = {k: v for k, v in self.aic_meta.items() if k != "sweep"}
        return {
            "ok": self.ok, "best": self.best, "inputs": self.inputs.to_dict(), "link": self.inputs.link.to_dict(),
            "aiconfigurator": {**meta, "same_tp_gate": "lifted" if self.lifted else "kept", "rows": self.rows},
            "candidates": [{**c.to_dict(), "warnings": self.warnings.get(c.shape, [])} for c in self.candidates],
            "aic_answer": self.aic_answer,
            "checks": CHECKS,
        }


def check_row(cand: Candidate, inputs: Inputs, kv: KvModel) -> None:
    """The row-level checks on CAND (filled in): KV term, TTFT with it, targets, link load, what pdctl cannot
    render."""
    row = cand.row
    rate = float(row["request_rate"])
    term = kv.term(cand.prefill.attn_tp, cand.decode.attn_tp, prefill_rate=rate / int(row["(p)workers"]),
                   decode_rate=rate / int(row["(d)workers"]))
    cand.kv = term
    cand.ttft_ms = float(row["ttft"]) + (term.transfer_ms if term else 0.0)
    cand.tokens_per_s_per_gpu = aic_cluster_figure(row["tokens/s/gpu"], int(row["num_total_gpus"]), inputs.gpus)
    out = cand.problems
    if cand.prefill.cp != 1:
        out.append({"rule": "context-parallel", "stage": "not rendered",
                    "message": f"prefill cp {cand.prefill.cp}: {CHECKS['context-parallel']}"})
    if term is None:
        out.append({"rule": "kv-transfer", "stage": "first transfer",
                    "message": f"attention TP {cand.prefill.attn_tp} -> {cand.decode.attn_tp}: {CHECKS['kv-transfer']}"})
    elif term.link_load > 1:
        out.append({"rule": "kv-link-capacity", "stage": "serving",
                    "message": f"{rate:.3g} req/s x {term.rank_bytes / 1e6:.4g} MB per prefill rank need "
                               f"{term.link_load:.2f}x what the link carries ({inputs.link.gbps:g} GB/s, "
                               f"{inputs.link.us_per_descriptor:g} µs/descriptor)"})
    if cand.ttft_ms > inputs.ttft_ms:
        kv_ms = f" (AIConfigurator {row['ttft']:g} + KV {term.transfer_ms:.1f})" if term else ""
        out.append({"rule": "ttft-target", "stage": "serving",
                    "message": f"TTFT {cand.ttft_ms:.1f} ms{kv_ms} > target {inputs.ttft_ms:g} ms"})
    if cand.itl_ms > inputs.itl_ms:
        out.append({"rule": "itl-target", "stage": "serving",
                    "message": f"ITL {cand.itl_ms:g} ms > target {inputs.itl_ms:g} ms"})


def _rank_key(c: Candidate) -> tuple[Any, ...]:
    return (not c.ok, -c.tokens_per_s_per_gpu, c.ttft_ms, c.itl_ms, c.gpus_used)


MISSES = ("ttft-target", "itl-target", "kv-link-capacity")  # what a different target or link would fix


def _miss_key(c: Candidate, inputs: Inputs) -> tuple[Any, ...]:
    """Nearest first: no rule that blocks it outright (SGLang's rules, what pdctl cannot render), then the
    smallest excess over the targets and the link, then throughput."""
    blocked = sum(p["rule"] not in MISSES for p in c.problems)
    excess = max(c.ttft_ms / inputs.ttft_ms, c.itl_ms / inputs.itl_ms, c.kv.link_load if c.kv else 1.0, 1.0)
    return (blocked, excess, -c.tokens_per_s_per_gpu)


def per_shape(cands: list[Candidate], inputs: Inputs) -> list[Candidate]:
    """The best row of every deployment shape: a feasible one by the ranking, else the nearest miss."""
    def key(c: Candidate) -> tuple[Any, ...]:
        return (False, *_rank_key(c)) if c.ok else (True, *_miss_key(c, inputs))

    best: dict[tuple[Any, ...], Candidate] = {}
    for c in cands:
        kept = best.get(c.shape)
        if kept is None or key(c) < key(kept):
            best[c.shape] = c
    return list(best.values())


def suggest(inputs: Inputs, *, store: Cache | None = None, say: Say | None = None,
            with_aic_answer: bool = False) -> SuggestResult:
    """The whole suggestion for INPUTS (AIConfigurator's runs cached in STORE)."""
    say = say or (lambda _t: None)
    query = aic.AicQuery(inputs.model.aic, inputs.aic_system, inputs.gpus, inputs.isl, inputs.osl)
    lifted = hetero_tp_runs(inputs)

    def sweep(ttft: float, lift: bool) -> aic.AicRows:
        say(f"AIConfigurator {aic.aic_version()}: {inputs.model.aic} on {inputs.gpus} x {inputs.aic_system}, "
            f"TTFT budget {ttft:g} ms, same-TP gate {'lifted' if lift else 'kept'}")
        try:
            return aic.run_sweep(query, ttft=ttft, tpot=inputs.itl_ms, lift_gate=lift, store=store)
        except aic.AicFailed as exc:
            if exc.kind == "memory":
                raise UserError(f"too few GPUs: {inputs.model.preset} does not fit in any worker of {inputs.gpus} "
                                f"{inputs.system} GPU(s) (AIConfigurator: {exc.message})") from None
            raise UserError(f"AIConfigurator has no worker for {inputs.model.preset} on {inputs.system}: "
                            f"{exc.message}") from None

    result = sweep(inputs.ttft_ms, lifted)
    records = result.records()
    if not records:  # AIConfigurator's own TTFT filter left nothing: a looser budget finds the near misses
        result = sweep(inputs.ttft_ms * RELAXED_TTFT, lifted)
        records = result.records()
    kv = KvModel(inputs.kv_shape, inputs.link)
    cands = [from_row(r, inputs.gpus) for r in records]
    for c in cands:
        check_row(c, inputs, kv)
    shapes = per_shape(cands, inputs)
    say(f"check-compat on {len(shapes)} candidate deployments ({len(cands)} AIConfigurator rows)")
    warnings: dict[tuple[Any, ...], list[dict[str, str]]] = {}
    for c in shapes:
        if c.prefill.cp != 1:  # not the deployment AIConfigurator modelled: judging its topology says nothing
            continue
        errors, warned = judge(candidate_data(inputs.skeleton, c), inputs.spec)
        c.problems.extend(errors)
        warnings[c.shape] = warned
    ok = sorted((c for c in shapes if c.ok), key=_rank_key)
    rejected = sorted((c for c in shapes if not c.ok), key=lambda c: _miss_key(c, inputs))
    answer = None
    if with_aic_answer:
        say("AIConfigurator's own answer: its same-TP gate, its picking")
        answer = aic.own_answer(query, ttft=inputs.ttft_ms, tpot=inputs.itl_ms, store=store)
    return SuggestResult(inputs, ok + rejected, len(records), result.meta, lifted, answer, warnings)
