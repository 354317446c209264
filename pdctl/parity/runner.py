"""The parity modes — cold, warm, concurrent, soak — on the candidate and, for the floor, on the controls.

- cold: both caches flushed before each prompt, one request at a time: the kit's check.
- warm: each prompt sent once to fill the caches, decode flushed (prefill keeps its prefix cache), then sent
  again; then a shared-prefix variant (the prompt's page-aligned prefix with a new tail). Both must report
  cached_tokens > 0 where a full page could be reused, read from the answer itself: in PD, SGLang's decode
  (and the reference engine's) reports prefill's count, which travels with the KV. The second send asks for
  logprobs of the last prompt position only: SGLang does not match a cached prefix past `logprob_start_len`.
- concurrent: the whole suite, several copies, sent at once, so that requests are batched (and later copies
  reuse earlier copies' prefixes).
- soak (pdctl.parity.soak): the concurrent procedure, round after round.
The reference's cold answers are the ground truth for every mode; every answer is scored on the reference's
tokens (pdctl.parity.teacher). The floor of a mode (pdctl.parity.floor) is the same procedure run on each
control — TP controls at the candidate's TP when its split differs from the reference's, else the
reference itself — and compared with the same cold answers.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from typing import Any

from pdctl.errors import CheckFailed
from pdctl.parity import client
from pdctl.parity.calibration import Calibration
from pdctl.parity.compare import Comparison, compare, decided_beyond
from pdctl.parity.floor import DEFAULT_FACTOR, Floor
from pdctl.parity.prompts import Prompt, shared_prefix_variant
from pdctl.parity.results import ModeResult, ParityResult
from pdctl.parity.soak import run_soak
from pdctl.parity.teacher import DEFAULT_MAX_RESYNCS, RefSequence, force, reference_sequence
from pdctl.target import Target


@dataclass(frozen=True)
class ProgressUpdate:
    """Where a run is: a phase (cold, warm, control warm, concurrent, ...), prompts done of total, and the
    comparisons passed/failed so far in that phase; `detail` names the prompt just sent."""

    phase: str
    done: int
    total: int
    passed: int = 0
    failed: int = 0
    detail: str = ""
    compares: bool = True  # False: a phase that only collects answers (nothing passes or fails in it)


Progress = Callable[[ProgressUpdate], None]
# warm's preparation: the reference's cold answers to each prompt's shared-prefix variant (compared in warm)
VARIANTS_PHASE = "warm prep: reference answers to shared-prefix variants"


@dataclass(frozen=True)
class ParityOptions:
    """What to run and how strictly to judge it."""

    modes: tuple[str, ...] = ("cold",)
    tolerance: float = 0.05
    max_new_tokens: int = 32
    control: bool = True  # measure the floor (controls) for every mode
    copies: int = 3  # concurrent (and soak): copies of the suite sent at once
    max_workers: int = 32
    page_size: int = 1  # for "could a prefix be reused?" and the shared-prefix variants
    vocab_size: int | None = None
    factor: float = DEFAULT_FACTOR
    max_resyncs: int = DEFAULT_MAX_RESYNCS
    soak_rounds: int | None = None  # --soak N
    soak_seconds: float | None = None  # --soak 10m


CONTROL_COPIES = 2  # the concurrent floor sends this many times the candidate's --copies


@dataclass(frozen=True)
class Control:
    """A correct server the floor is measured on: the reference itself, or a TP control."""

    name: str
    target: Target


def _flush(urls: list[str]) -> None:
    for url in urls:
        client.flush_cache(url)


def _try_send(target: Target, prompt: Prompt, opts: ParityOptions, *, start: int = 0) -> dict[str, Any] | str:
    """The server's answer, or the error text: a server that errors fails its comparison, not the run."""
    try:
        return client.generate(target.url, prompt, max_new_tokens=opts.max_new_tokens, logprob_start_len=start)
    except CheckFailed as exc:
        return exc.message + (f": {exc.detail}" if exc.detail else "")


def _resender(target: Target) -> Callable[[list[int], int], dict[str, Any] | str]:
    """Resends after a flip: the prompt plus the reference's tokens, prefix cache allowed."""
    def resend(ids: list[int], n: int) -> dict[str, Any] | str:
        try:
            return client.generate(target.url, Prompt("resend", input_ids=ids), max_new_tokens=n,
                                   logprob_start_len=len(ids) - 1)
        except CheckFailed as exc:
            return exc.message
    return resend


def _prompt_len(prompt: Prompt, reference: dict[str, Any]) -> int:
    return prompt.num_tokens or int(reference.get("prompt_tokens") or 0)


def _reusable(prompt: Prompt, reference: dict[str, Any], opts: ParityOptions) -> bool:
    """Whether a full page of PROMPT can be served from a prefix cache (SGLang matches at most len-1 tokens)."""
    return (_prompt_len(prompt, reference) - 1) // max(1, opts.page_size) >= 1


def _warm_start(prompt: Prompt, reference: dict[str, Any]) -> int:
    return max(0, _prompt_len(prompt, reference) - 1)


@dataclass
class Truth:
    """The reference's cold answer to one prompt, and the sequence every other answer is scored on."""

    meta: dict[str, Any]
    seq: RefSequence


@dataclass
class Baseline:
    """The reference's side of a run — its cold answers, the shared-prefix variants and the floor of each
    mode — measured once; several candidates can be judged against it (`run_parity(..., baseline=)`)."""

    prompts: list[Prompt]
    opts: ParityOptions
    controls: list[str]
    truth: list[Truth] = field(default_factory=list)
    variants: list[Prompt | None] = field(default_factory=list)
    variant_truth: list[Truth | None] = field(default_factory=list)
    floors: dict[str, Floor] = field(default_factory=dict)

    def fits(self, prompts: list[Prompt], opts: ParityOptions) -> str | None:
        """Why this baseline cannot judge a run of PROMPTS with OPTS (None when it can)."""
        if [p.payload() for p in prompts] != [p.payload() for p in self.prompts]:
            return "it was measured on other prompts"
        mine, theirs = self.opts, opts
        for key in ("max_new_tokens", "copies", "factor", "page_size", "max_resyncs", "control"):
            if getattr(mine, key) != getattr(theirs, key):
                return f"it was measured with {key}={getattr(mine, key)}"
        if "warm" in theirs.modes and not self.variants:
            return "it has no shared-prefix variants (measured without warm)"
        soak = theirs.soak_rounds or theirs.soak_seconds
        needed = {m for m in theirs.modes} | ({"concurrent"} if soak else set())
        if theirs.control and not needed <= set(self.floors):
            return f"it has no floor for {', '.join(sorted(needed - set(self.floors)))}"
        return None


class ParityRun:
    """One parity run: the baseline (reference truth and floors), then each requested mode on the candidate."""

    def __init__(
        self, candidate: Target | None, reference: Target, prompts: list[Prompt], opts: ParityOptions,
        progress: Progress | None = None, tp_controls: list[Control] | None = None,
        calibration: Calibration | None = None,
    ) -> None:
        self.candidate, self.reference, self.prompts, self.opts = candidate, reference, prompts, opts
        self.calibration = calibration
        self.progress = progress or (lambda _msg: None)
        self.controls = list(tp_controls or []) or [Control("reference (itself)", reference)]
        self.base = Baseline(prompts, opts, [c.name for c in self.controls])

    @property
    def truth(self) -> list[Truth]:
        return self.base.truth

    @property
    def variants(self) -> list[Prompt | None]:
        return self.base.variants

    @property
    def variant_truth(self) -> list[Truth | None]:
        return self.base.variant_truth

    # -- judging -----------------------------------------------------------------------------------------
    def judge(self, target: Target, answer: dict[str, Any] | str, truth: Truth, *, index: int, prompt: Prompt,
              label: str, mode: str, expect_cached: bool = False) -> Comparison:
        """Score ANSWER on TRUTH (resending after flips); on the candidate, stop resending once the floor's
        threshold of MODE is certainly exceeded."""
        prompt_len = int(truth.meta.get("prompt_tokens") or 0) or truth.seq.prompt_len
        decided = decided_beyond(self._decides_at(target, mode), truth.seq, prompt_len)
        forced = force(answer, truth.seq, _resender(target), max_resyncs=self.opts.max_resyncs, decided=decided)
        return compare(forced, truth.meta, truth.seq, prompt=index, prompt_name=prompt.name, label=label,
                       tolerance=self.opts.tolerance, max_new_tokens=self.opts.max_new_tokens,
                       expect_cached=expect_cached)

    def _decides_at(self, target: Target, mode: str) -> float | None:
        """The score past which the candidate's verdict cannot change: the floor's threshold; with a floor that
        lacks a control, the gross bound (None: measure every position, a failure may be "not calibrated")."""
        floor = self._floor_for(target, mode)
        if floor is None or self.calibration is None or self.calibration.calibrated:
            return floor.threshold if floor is not None else None
        gross = self.calibration.gross_score
        return None if gross is None else max(gross, floor.threshold)

    def _floor_for(self, target: Target, mode: str) -> Floor | None:
        """The floor judging TARGET's comparisons of MODE now: the candidate's, once measured (else None)."""
        return self.base.floors.get(mode) if target is self.candidate and self.opts.control else None

    def _report(self, phase: str, done: int, total: int, comparisons: list[Comparison] | None, detail: str,
                floor: Floor | None = None) -> None:
        """Progress: passes are comparisons within the tolerance or (the candidate's) within FLOOR's threshold.
        COMPARISONS None: the phase collects answers only (its progress shows no pass/fail counts)."""
        def ok(c: Comparison) -> bool:
            return c.passed or (floor is not None and not c.hard_failure and c.score <= floor.threshold)
        passed = sum(ok(c) for c in comparisons or [])
        self.progress(ProgressUpdate(phase, done, total, passed, len(comparisons or []) - passed, detail,
                                     compares=comparisons is not None))

    # -- the reference's ground truth; the cold procedure --------------------------------------------------
    def _reference_cold(self, prompt: Prompt) -> Truth:
        _flush(self.reference.cold_flush_urls)
        meta = client.generate(self.reference.url, prompt, max_new_tokens=self.opts.max_new_tokens)
        return Truth(meta, reference_sequence(prompt, meta))

    def collect_reference(self) -> None:
        """The reference's answers with empty caches: the ground truth of every mode."""
        n = len(self.prompts)
        for i, prompt in enumerate(self.prompts):
            self.base.truth.append(self._reference_cold(prompt))
            self._report("reference", i + 1, n, None, prompt.name)

    def _cold_one(self, target: Target, i: int, prompt: Prompt, label: str) -> Comparison:
        _flush(target.cold_flush_urls)
        return self.judge(target, _try_send(target, prompt, self.opts), self.truth[i], index=i, prompt=prompt,
                          label=label, mode="cold")

    def _cold_on(self, target: Target, *, label: str) -> list[Comparison]:
        out: list[Comparison] = []
        for i, prompt in enumerate(self.prompts):
            out.append(self._cold_one(target, i, prompt, label))
            self._report(label, i + 1, len(self.prompts), out, prompt.name, self._floor_for(target, "cold"))
        return out

    def collect_variants(self) -> None:
        """Shared-prefix variants of each prompt and the reference's cold answers to them."""
        n = len(self.prompts)
        for i, prompt in enumerate(self.prompts):
            variant = shared_prefix_variant(prompt, page_size=self.opts.page_size, vocab_size=self.opts.vocab_size)
            self.base.variants.append(variant)
            self.base.variant_truth.append(self._reference_cold(variant) if variant is not None else None)
            self._report(VARIANTS_PHASE, i + 1, n, None, variant.name if variant else prompt.name)

    # -- warm ------------------------------------------------------------------------------------------
    def _warm_on(self, target: Target, *, label: str, enforce_cache: bool) -> list[Comparison]:
        out: list[Comparison] = []
        n = len(self.prompts)
        for i, prompt in enumerate(self.prompts):
            self._warm_one(target, i, prompt, label, enforce_cache, out)
            self._report(label, i + 1, n, out, prompt.name, self._floor_for(target, "warm"))
        return out

    def _warm_one(
        self, target: Target, i: int, prompt: Prompt, label: str, enforce_cache: bool, out: list[Comparison]
    ) -> None:
        """Prime, resend, and send the shared-prefix variant of prompt I; comparisons go to OUT."""
        truth = self.truth[i]
        _flush(target.cold_flush_urls)
        prime = _try_send(target, prompt, self.opts)
        if isinstance(prime, str):
            out.append(self.judge(target, prime, truth, index=i, prompt=prompt, label=label, mode="warm"))
            return
        # the variant shares the prompt's full pages (text: its whole text), if the prompt has any
        expect_cached = enforce_cache and _reusable(prompt, truth.meta, self.opts)
        _flush(target.flush_decode)
        again = _try_send(target, prompt, self.opts, start=_warm_start(prompt, truth.meta))
        out.append(self.judge(target, again, truth, index=i, prompt=prompt, label=label, mode="warm",
                              expect_cached=expect_cached))
        variant, vtruth = self.variants[i], self.variant_truth[i]
        if variant is None or vtruth is None:
            return
        _flush(target.flush_decode)
        answer = _try_send(target, variant, self.opts, start=_warm_start(variant, vtruth.meta))
        out.append(self.judge(target, answer, vtruth, index=i, prompt=variant, label=f"{label}:prefix", mode="warm",
                              expect_cached=expect_cached))

    # -- concurrent ------------------------------------------------------------------------------------
    def concurrent_on(self, target: Target, *, label: str, flush: bool = True, phase: str | None = None,
                      copies: int | None = None) -> list[Comparison]:
        """The suite x COPIES (default --copies) sent at once; every answer judged as it arrives (progress stays
        live under PHASE, default LABEL)."""
        phase = phase or label
        copies = copies or self.opts.copies
        if flush:
            _flush(target.cold_flush_urls)
        jobs = [(copy, i, p) for copy in range(copies) for i, p in enumerate(self.prompts)]
        workers = max(1, min(self.opts.max_workers, len(jobs)))
        judged: dict[int, Comparison] = {}
        self._report(phase, 0, len(jobs), [], f"{label}: {len(self.prompts)} prompts x {copies} copies at once")
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_try_send, target, p, self.opts): n for n, (_, _, p) in enumerate(jobs)}
            for future in as_completed(futures):
                n = futures[future]
                copy, i, p = jobs[n]
                judged[n] = self.judge(target, future.result(), self.truth[i], index=i, prompt=p,
                                       label=f"{label}#{copy}", mode="concurrent")
                self._report(phase, len(judged), len(jobs), list(judged.values()), p.name,
                             self._floor_for(target, "concurrent"))
        return [judged[n] for n in range(len(jobs))]

    # -- floors ----------------------------------------------------------------------------------------
    def floor(self, mode: str, procedure: Callable[[Target, str], list[Comparison]]) -> Floor:
        """PROCEDURE run on every control; one Floor of all their comparisons."""
        comparisons: list[Comparison] = []
        for control in self.controls:
            label = f"control {mode}" if len(self.controls) == 1 else f"control {control.name} {mode}"
            comparisons += procedure(control.target, label)
        return Floor([c.name for c in self.controls], comparisons, self.opts.factor)

    # -- all of it -------------------------------------------------------------------------------------
    def measure_baseline(self) -> Baseline:
        """The reference's cold answers, the variants (warm) and the floor of every requested mode."""
        opts = self.opts
        self.collect_reference()
        if "warm" in opts.modes:
            self.collect_variants()
        if not opts.control:
            return self.base
        procedures = {
            "cold": lambda t, label: self._cold_on(t, label=label),
            "warm": lambda t, label: self._warm_on(t, label=label, enforce_cache=False),
            # twice the candidate's copies: more batch compositions, so the floor reaches further into the tail
            "concurrent": lambda t, label: self.concurrent_on(t, label=label, copies=CONTROL_COPIES * opts.copies),
        }
        wanted = [m for m in procedures if m in opts.modes or (m == "concurrent" and self._soaking)]
        for mode in wanted:
            self.base.floors[mode] = self.floor(mode, procedures[mode])
        return self.base

    @property
    def _soaking(self) -> bool:
        return bool(self.opts.soak_rounds or self.opts.soak_seconds)

    def run(self, baseline: Baseline | None = None) -> tuple[dict[str, ModeResult], Any]:
        """The baseline (measured here unless given), then the requested modes and the soak on the candidate."""
        if baseline is not None:
            problem = baseline.fits(self.prompts, self.opts)
            if problem:
                raise ValueError(f"the baseline does not fit this run: {problem}")
            self.base = baseline
        else:
            self.measure_baseline()
        assert self.candidate is not None
        opts, cand = self.opts, self.candidate
        floors = self.base.floors if opts.control else {}
        modes: dict[str, ModeResult] = {}
        if "cold" in opts.modes:
            modes["cold"] = ModeResult("cold", self._cold_on(cand, label="cold"), floors.get("cold"), self.calibration)
        if "warm" in opts.modes:
            modes["warm"] = ModeResult("warm", self._warm_on(cand, label="warm", enforce_cache=True), floors.get("warm"),
                                       self.calibration)
        if "concurrent" in opts.modes:
            modes["concurrent"] = ModeResult("concurrent", self.concurrent_on(cand, label="concurrent"),
                                             floors.get("concurrent"), self.calibration)
        cold = modes.get("cold")
        vouched = {c.prompt for c in cold.comparisons if c.passed} if cold is not None else set()
        for mode in modes.values():
            mode.explain(vouched)
        soak = None
        if self._soaking:
            def send_round(index: int) -> list[Comparison]:
                return self.concurrent_on(cand, label=f"soak{index}", flush=index == 1, phase="soak")

            soak = run_soak(send_round, floors.get("concurrent"), rounds=opts.soak_rounds, seconds=opts.soak_seconds,
                            calibration=self.calibration)
        return modes, soak


def measure_baseline(
    reference: Target, prompts: list[Prompt], opts: ParityOptions, progress: Progress | None = None,
    tp_controls: list[Control] | None = None,
) -> Baseline:
    """The reference's side of a parity run, to judge several candidates against (tests, sweeps)."""
    return ParityRun(None, reference, prompts, opts, progress, tp_controls).measure_baseline()


def run_parity(
    candidate: Target, reference: Target, prompts: list[Prompt], opts: ParityOptions,
    progress: Progress | None = None, tp_controls: list[Control] | None = None, baseline: Baseline | None = None,
    calibration: Calibration | None = None,
) -> ParityResult:
    """Run parity of CANDIDATE against REFERENCE on PROMPTS; the result carries the verdict and the JSON.
    CALIBRATION: whether the floor has every control the comparison needs (None: it has)."""
    started = time.monotonic()
    run = ParityRun(candidate, reference, prompts, opts, progress, tp_controls, calibration)
    modes, soak = run.run(baseline)
    suite = [{"prompt": i, "name": p.name, "tokens": p.num_tokens or run.truth[i].seq.prompt_len or None}
             for i, p in enumerate(prompts)]
    return ParityResult(
        modes=modes, tolerance=opts.tolerance, max_new_tokens=opts.max_new_tokens, candidate=candidate.url,
        reference=reference.url, suite=suite, factor=opts.factor, soak=soak, wall_s=time.monotonic() - started,
        calibration=calibration if opts.control else None,
    )
