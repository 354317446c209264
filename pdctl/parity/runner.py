"""The three parity modes — cold, warm, concurrent — and the control runs of the reference against itself.

- cold: both caches flushed before each prompt, one request at a time: the kit's check. Any difference here
  is the deployment's.
- warm: each prompt sent once to fill the candidate's caches, decode flushed (prefill keeps its prefix
  cache), then sent again; then a shared-prefix variant (the prompt's page-aligned prefix with a new tail).
  Both must report cached_tokens > 0 where a full page could be reused, read from the answer itself: in PD,
  SGLang's decode (and the reference engine's) reports prefill's count, which travels with the KV. The second
  send asks for logprobs of the last prompt position only: SGLang does not match a cached prefix past
  `logprob_start_len`.
- concurrent: the whole suite, several copies, sent at once, so that requests are batched (and later copies
  reuse earlier copies' prefixes).
The reference's cold answers are the ground truth for every mode; the control repeats the warm and
concurrent procedures on the reference itself and compares it with its own cold answers (the noise floor).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Any

from pdctl.errors import CheckFailed
from pdctl.parity import client
from pdctl.parity.compare import Comparison, compare
from pdctl.parity.prompts import Prompt, shared_prefix_variant
from pdctl.parity.results import ModeResult, ParityResult
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
    max_new_tokens: int = 4
    control: bool = True  # reference-vs-itself comparisons for warm/concurrent
    copies: int = 3  # concurrent: copies of the suite sent at once
    max_workers: int = 32
    page_size: int = 1  # for "could a prefix be reused?" and the shared-prefix variants
    vocab_size: int | None = None


def _flush(urls: list[str]) -> None:
    for url in urls:
        client.flush_cache(url)


def _send(target: Target, prompt: Prompt, opts: ParityOptions, *, start: int = 0) -> dict[str, Any]:
    return client.generate(target.url, prompt, max_new_tokens=opts.max_new_tokens, logprob_start_len=start)


def _try_send(target: Target, prompt: Prompt, opts: ParityOptions, *, start: int = 0) -> dict[str, Any] | str:
    """The candidate's answer, or the error text: a candidate that errors fails its comparison, not the run."""
    try:
        return _send(target, prompt, opts, start=start)
    except CheckFailed as exc:
        return exc.message + (f": {exc.detail}" if exc.detail else "")


def _errored(index: int, prompt: Prompt, label: str, reference: dict[str, Any], error: str) -> Comparison:
    return Comparison(
        prompt=index, prompt_name=prompt.name, prompt_tokens=int(reference.get("prompt_tokens") or 0),
        label=label, tokens_match=False, first_mismatch=0, first_token_mismatch=0, max_abs_delta=math.inf,
        passed=False, reason=f"request failed: {error}",
    )


def _judge(
    answer: dict[str, Any] | str, reference: dict[str, Any], *, index: int, prompt: Prompt, label: str,
    opts: ParityOptions, expect_cached: bool = False,
) -> Comparison:
    if isinstance(answer, str):
        return _errored(index, prompt, label, reference, answer)
    return compare(
        answer, reference, prompt=index, prompt_name=prompt.name, label=label, tolerance=opts.tolerance,
        max_new_tokens=opts.max_new_tokens, expect_cached=expect_cached,
    )


def _prompt_len(prompt: Prompt, reference: dict[str, Any]) -> int:
    return prompt.num_tokens or int(reference.get("prompt_tokens") or 0)


def _reusable(prompt: Prompt, reference: dict[str, Any], opts: ParityOptions) -> bool:
    """Whether a full page of PROMPT can be served from a prefix cache (SGLang matches at most len-1 tokens)."""
    return (_prompt_len(prompt, reference) - 1) // max(1, opts.page_size) >= 1


def _warm_start(prompt: Prompt, reference: dict[str, Any]) -> int:
    return max(0, _prompt_len(prompt, reference) - 1)


class ParityRun:
    """One parity run: the reference's cold answers, then each requested mode (and its control)."""

    def __init__(
        self, candidate: Target, reference: Target, prompts: list[Prompt], opts: ParityOptions,
        progress: Progress | None = None,
    ) -> None:
        self.candidate, self.reference, self.prompts, self.opts = candidate, reference, prompts, opts
        self.progress = progress or (lambda _msg: None)
        self.ref_cold: list[dict[str, Any]] = []
        self.variants: list[Prompt | None] = []
        self.ref_variants: list[dict[str, Any] | None] = []

    # -- the reference's ground truth -------------------------------------------------------------------
    def _reference_cold(self, index: int, prompt: Prompt) -> dict[str, Any]:
        _flush(self.reference.cold_flush_urls)
        return _send(self.reference, prompt, self.opts)

    def collect_reference(self, cold_candidate: ModeResult | None) -> None:
        """Reference answers with empty caches; when CANDIDATE is given, the cold mode runs interleaved."""
        phase = "cold" if cold_candidate is not None else "reference"
        n = len(self.prompts)
        for i, prompt in enumerate(self.prompts):
            ref = self._reference_cold(i, prompt)
            self.ref_cold.append(ref)
            if cold_candidate is not None:
                _flush(self.candidate.cold_flush_urls)
                answer = _try_send(self.candidate, prompt, self.opts)
                cold_candidate.comparisons.append(_judge(answer, ref, index=i, prompt=prompt, label="cold", opts=self.opts))
            self._report(phase, i + 1, n, cold_candidate.comparisons if cold_candidate else [], prompt.name)

    def _report(self, phase: str, done: int, total: int, comparisons: list[Comparison] | None, detail: str) -> None:
        """COMPARISONS None: the phase collects answers only (its progress shows no pass/fail counts)."""
        passed = sum(c.passed for c in comparisons or [])
        self.progress(ProgressUpdate(phase, done, total, passed, len(comparisons or []) - passed, detail,
                                     compares=comparisons is not None))

    def collect_variants(self) -> None:
        """Shared-prefix variants of each prompt and the reference's cold answers to them."""
        n = len(self.prompts)
        for i, prompt in enumerate(self.prompts):
            variant = shared_prefix_variant(prompt, page_size=self.opts.page_size, vocab_size=self.opts.vocab_size)
            self.variants.append(variant)
            self.ref_variants.append(self._reference_cold(i, variant) if variant is not None else None)
            self._report(VARIANTS_PHASE, i + 1, n, None, variant.name if variant else prompt.name)

    # -- warm ------------------------------------------------------------------------------------------
    def _warm_on(self, target: Target, *, label: str, enforce_cache: bool) -> list[Comparison]:
        out: list[Comparison] = []
        n = len(self.prompts)
        for i, prompt in enumerate(self.prompts):
            self._warm_one(target, i, prompt, label, enforce_cache, out)
            self._report(label, i + 1, n, out, prompt.name)
        return out

    def _warm_one(
        self, target: Target, i: int, prompt: Prompt, label: str, enforce_cache: bool, out: list[Comparison]
    ) -> None:
        """Prime, resend, and send the shared-prefix variant of prompt I; comparisons go to OUT."""
        ref = self.ref_cold[i]
        _flush(target.cold_flush_urls)
        prime = _try_send(target, prompt, self.opts)
        if isinstance(prime, str):
            out.append(_errored(i, prompt, label, ref, prime))
            return
        # the variant shares the prompt's full pages (text: its whole text), if the prompt has any
        expect_cached = enforce_cache and _reusable(prompt, ref, self.opts)
        _flush(target.flush_decode)
        again = _try_send(target, prompt, self.opts, start=_warm_start(prompt, ref))
        out.append(_judge(again, ref, index=i, prompt=prompt, label=label, opts=self.opts,
                          expect_cached=expect_cached))
        variant, ref_variant = self.variants[i], self.ref_variants[i]
        if variant is None or ref_variant is None:
            return
        _flush(target.flush_decode)
        answer = _try_send(target, variant, self.opts, start=_warm_start(variant, ref_variant))
        out.append(_judge(answer, ref_variant, index=i, prompt=variant, label=f"{label}:prefix", opts=self.opts,
                          expect_cached=expect_cached))

    # -- concurrent ------------------------------------------------------------------------------------
    def _concurrent_on(self, target: Target, *, label: str) -> list[Comparison]:
        _flush(target.cold_flush_urls)
        jobs = [(copy, i, p) for copy in range(self.opts.copies) for i, p in enumerate(self.prompts)]
        workers = max(1, min(self.opts.max_workers, len(jobs)))
        judged: dict[int, Comparison] = {}
        self._report(label, 0, len(jobs), [], f"{len(self.prompts)} prompts x {self.opts.copies} copies at once")
        with ThreadPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_try_send, target, p, self.opts): n for n, (_, _, p) in enumerate(jobs)}
            for future in as_completed(futures):  # judged as answers arrive, so progress is live
                n = futures[future]
                copy, i, p = jobs[n]
                judged[n] = _judge(future.result(), self.ref_cold[i], index=i, prompt=p, label=f"{label}#{copy}",
                                   opts=self.opts)
                self._report(label, len(judged), len(jobs), list(judged.values()), p.name)
        return [judged[n] for n in range(len(jobs))]

    # -- all of it -------------------------------------------------------------------------------------
    def run(self) -> dict[str, ModeResult]:
        """Run the requested modes in order cold, warm, concurrent; return their results (explained)."""
        modes: dict[str, ModeResult] = {}
        cold = ModeResult("cold") if "cold" in self.opts.modes else None
        self.collect_reference(cold)
        if cold is not None:
            modes["cold"] = cold
        if "warm" in self.opts.modes:
            self.collect_variants()
            warm = ModeResult("warm", self._warm_on(self.candidate, label="warm", enforce_cache=True))
            if self.opts.control:
                warm.control = self._warm_on(self.reference, label="control warm", enforce_cache=False)
            modes["warm"] = warm
        if "concurrent" in self.opts.modes:
            conc = ModeResult("concurrent", self._concurrent_on(self.candidate, label="concurrent"))
            if self.opts.control:
                conc.control = self._concurrent_on(self.reference, label="control concurrent")
            modes["concurrent"] = conc
        vouched = {c.prompt for c in cold.comparisons if c.passed} if cold is not None else set()
        for mode in modes.values():
            mode.explain(vouched)
        return modes


def run_parity(
    candidate: Target, reference: Target, prompts: list[Prompt], opts: ParityOptions,
    progress: Progress | None = None,
) -> ParityResult:
    """Run parity of CANDIDATE against REFERENCE on PROMPTS; the result carries the verdict and the JSON."""
    modes = ParityRun(candidate, reference, prompts, opts, progress).run()
    suite = [{"prompt": i, "name": p.name, "tokens": p.num_tokens} for i, p in enumerate(prompts)]
    return ParityResult(
        modes=modes, tolerance=opts.tolerance, max_new_tokens=opts.max_new_tokens, candidate=candidate.url,
        reference=reference.url, suite=suite,
    )
