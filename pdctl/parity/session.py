"""From command-line choices to a finished parity run: endpoints, reachability, suite facts, prompts, run.

Why a module between the CLI and the runner: the CLI only parses and renders (ARCHITECTURE.md), while this
glue — which server to ask for the page size, when a model spec overrides it, launching and tearing down a
reference topology — is logic that tests exercise directly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from pdctl.errors import CheckFailed, UserError
from pdctl.launch.scoped import launched_reference
from pdctl.liveness import Watchdog, run_watched
from pdctl.models import resolve_model_spec
from pdctl.parity.calibration import Calibration, gross_numerics
from pdctl.parity.controls import TPInfo, tp_controls
from pdctl.parity.floor import DEFAULT_FACTOR
from pdctl.parity.positions import analyze
from pdctl.parity.prompts import Prompt, SuiteFacts, default_suite, facts_from_info, load_prompts_file
from pdctl.parity.results import ParityResult
from pdctl.parity.runner import (
    Baseline,
    ParityOptions,
    Progress,
    ProgressUpdate,
    measure_baseline,
    run_parity,
)
from pdctl.parity.soak import parse_soak
from pdctl.parity.teacher import DEFAULT_MAX_RESYNCS
from pdctl.reference.args import NUMERICS  # the reference engine's --numerics (argparse only, no torch)
from pdctl.runs.lock import lock_pointer
from pdctl.runs.state import numerics_notes, topology_file_of_run
from pdctl.target import Target, get_json, resolve
from pdctl.topology import load_topology


@dataclass
class ParityRequest:
    """Everything the user asked for on the command line, already parsed."""

    candidate_url: str | None = None
    run_dir: str | None = None
    reference_url: str | None = None
    reference_topology: str | None = None
    decode_urls: tuple[str, ...] = ()
    prefill_urls: tuple[str, ...] = ()
    modes: tuple[str, ...] = ("cold", "warm", "concurrent")
    prompts_file: str | None = None
    max_new_tokens: int | None = None  # None: the run's eval.parity (topology), else PARITY_DEFAULTS
    tolerance: float | None = None
    control: bool = True
    copies: int = 3
    max_prompt_tokens: int | None = None
    model: str | None = None
    overrides: dict[str, int | None] = field(default_factory=dict)  # page_size, vocab_size, sliding_window, ...
    seed: int = 0
    launch_timeout: float = 600.0
    deadline_s: float | None = None  # the whole command's limit (--deadline)
    factor: float = DEFAULT_FACTOR  # --floor-factor
    tp_control_urls: tuple[str, ...] = ()
    tp_control: bool = True  # --no-tp-control: never start one
    numerics: str | None = None  # of the reference-engine servers parity starts (reference topology, TP controls)
    soak: str | None = None  # --soak N | 10m
    max_resyncs: int = DEFAULT_MAX_RESYNCS

    def validate(self) -> None:
        """Reject contradictory or out-of-range options (exit 2) before anything is contacted."""
        if self.candidate_url is not None and self.run_dir is not None:
            raise UserError("give either --candidate URL or --run-dir DIR, not both")
        if (self.reference_url is None) == (self.reference_topology is None):
            raise UserError("give exactly one of --reference URL and --reference-topology FILE")
        if self.max_new_tokens is not None and self.max_new_tokens < 1:
            raise UserError("--max-new-tokens must be at least 1")
        if self.tolerance is not None and not self.tolerance >= 0:
            raise UserError("--tolerance must be a non-negative number")
        if self.copies < 1:
            raise UserError("--copies must be at least 1")
        if self.max_prompt_tokens is not None and self.max_prompt_tokens < 2:
            raise UserError("--max-prompt-tokens must be at least 2")
        if not self.factor >= 1:
            raise UserError("--floor-factor must be at least 1 (the floor itself)")
        if self.numerics is not None and self.numerics not in NUMERICS:
            raise UserError(f"--numerics must be one of {', '.join(NUMERICS)}")
        if self.max_resyncs < 0:
            raise UserError("--max-resyncs must be >= 0")
        parse_soak(self.soak)
        if self.tp_control_urls and not self.tp_control:
            raise UserError("give --tp-control URL or --no-tp-control, not both")
        for key, value in self.overrides.items():
            if value is not None and value < 1:
                raise UserError(f"--{key.replace('_', '-')} must be a positive integer, got {value}")


# Built-in settings when neither the command line nor the candidate run's topology (eval.parity) gives them.
PARITY_DEFAULTS: dict[str, Any] = {"max_new_tokens": 32, "tolerance": 0.05}


def settings(req: ParityRequest, candidate: Target) -> tuple[ParityRequest, str]:
    """REQ with every setting the command line left out taken from the candidate run's topology (eval.parity:
    what `pdctl launch` recorded, as `eval gsm8k` reads eval.gsm8k), else from PARITY_DEFAULTS; and where
    they came from. Options given on the command line always win."""
    values, source = dict(PARITY_DEFAULTS), "built-in defaults"
    path = topology_file_of_run(candidate.run_dir, candidate.state) if candidate.run_dir is not None else None
    if path is not None:
        block = load_topology(path).eval.parity
        values.update({key: getattr(block, key) for key in PARITY_DEFAULTS})
        source = f"eval.parity of {path}"
    given = {key: getattr(req, key) for key in PARITY_DEFAULTS if getattr(req, key) is not None}
    if len(given) == len(PARITY_DEFAULTS):
        source = "the command line"
    return dataclasses.replace(req, **{**values, **given}), source


def candidate_target(req: ParityRequest) -> Target:
    """The candidate deployment: a URL (with optional decode/prefill URLs) or a run dir's state.json.

    UserError (exit 2) when it does not answer at all; CheckFailed (exit 1) naming a dead process of the run.
    """
    return resolve(req.candidate_url, req.run_dir, what="candidate", doing="parity",
                   decode_urls=req.decode_urls, prefill_urls=req.prefill_urls)


@contextlib.contextmanager
def reference_target(req: ParityRequest) -> Iterator[Target]:
    """The reference: a URL (UserError when it does not answer), or a topology launched for the block."""
    if req.reference_url is not None:
        yield resolve(req.reference_url, None, what="reference")  # a PD reference (full-cache control): a router too
        return
    assert req.reference_topology is not None
    if not Path(req.reference_topology).is_file():
        raise UserError(f"--reference-topology {req.reference_topology}: no such file")
    overrides = numerics_overrides(req.reference_topology, req.numerics)
    with launched_reference(req.reference_topology, timeout=req.launch_timeout, overrides=overrides) as target:
        yield target


def numerics_overrides(topology: str, numerics: str | None) -> tuple[str, ...]:
    """--numerics as `--set` overrides of TOPOLOGY: every reference-engine server of it computes with NUMERICS
    (server.args, and each role's args, which are merged over the server's)."""
    if numerics is None:
        return ()
    topo = load_topology(topology)
    if topo.engine.kind != "reference":
        raise UserError("--numerics applies to the reference engine (engine.kind: reference); "
                        f"{topology} runs {topo.engine.kind}")
    roles = [name for name in ("colocated", "prefill", "decode") if getattr(topo, name) is not None]
    return tuple(f"{section}.args.numerics={numerics}" for section in ("server", *roles))


def _model_spec_facts(model: str, *, strict: bool = True) -> dict[str, int | None]:
    """Vocabulary and sliding window of MODEL (a directory, config.json, repo id or preset) via pdctl.models.

    STRICT=False (a model_path a server reported, which may not exist on this machine) returns {} instead
    of raising when the spec cannot be resolved.
    """
    path = Path(model)
    cfg = SimpleNamespace(path=model, revision=None, config=str(path) if path.is_file() else None, preset=None)
    try:
        spec = resolve_model_spec(cfg)
    except UserError:
        if strict:
            raise
        return {}
    return {"vocab_size": spec.vocab_size, "sliding_window": spec.sliding_window}


def _info(target: Target) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    return (get_json(target.info_url, "/server_info", "/get_server_info"),
            get_json(target.info_url, "/model_info", "/get_model_info"))


def gather_facts(candidate: Target, reference: Target, req: ParityRequest) -> SuiteFacts:
    """Suite facts: server info (reference, then the candidate's prefill, which wins), the model spec of
    --model or else of the model_path the servers report, then explicit flags."""
    cand_server, cand_model = _info(candidate)
    ref_server, ref_model = _info(reference)
    cand = facts_from_info(cand_server, cand_model)
    ref = facts_from_info(ref_server, ref_model)
    facts = SuiteFacts()
    for key in ("page_size", "vocab_size", "sliding_window", "chunked_prefill_size", "context_length"):
        for name, found in (("reference", ref), ("candidate", cand)):  # candidate last: its numbers win
            if key in found.sources:
                facts = facts.with_overrides(f"{name} {found.sources[key]}", **{key: getattr(found, key)})
    if ref.context_length and cand.context_length:  # the shorter context bounds the prompts both can take
        facts = facts.with_overrides("min of both servers", context_length=min(ref.context_length, cand.context_length))
    if req.model:
        facts = facts.with_overrides(f"model spec {req.model}", **_model_spec_facts(req.model))
    elif facts.vocab_size is None or facts.sliding_window is None:
        # SGLang's /model_info has neither; the model_path it reports usually resolves to a spec.
        for doc in (cand_model, ref_model):
            model_path = (doc or {}).get("model_path")
            if isinstance(model_path, str) and model_path:
                found_spec = _model_spec_facts(model_path, strict=False)
                if found_spec:
                    missing = {k: v for k, v in found_spec.items() if getattr(facts, k) is None}
                    facts = facts.with_overrides(f"model spec of {model_path}", **missing)
                    break
    return facts.with_overrides("command line", **req.overrides)


def build_prompts(req: ParityRequest, facts: SuiteFacts) -> list[Prompt]:
    """--prompts FILE, or the default edge-length suite for FACTS."""
    if req.prompts_file:
        return load_prompts_file(req.prompts_file, vocab_size=facts.vocab_size)
    return default_suite(facts, max_new_tokens=req.max_new_tokens, max_prompt_tokens=req.max_prompt_tokens,
                         seed=req.seed)


def run_request(req: ParityRequest, progress: Progress | None = None,
                baselines: dict[tuple[str, ...], Baseline] | None = None) -> ParityResult:
    """Do the whole run the user asked for; the reference topology (if any) is torn down before returning.
    BASELINES (tests, sweeps): the reference's side measured once per reference and control URLs and reused
    while it fits (pdctl.parity.runner.Baseline), as one run judges its one candidate."""
    started = time.monotonic()
    req.validate()
    say = progress or (lambda _update: None)
    say(ProgressUpdate("setup", 0, 0, detail="checking the candidate"))
    candidate = candidate_target(req)
    req, settings_from = settings(req, candidate)  # eval.parity's values are validated by the topology's schema
    what = "launching the reference topology" if req.reference_topology else "checking the reference"
    say(ProgressUpdate("setup", 0, 0, detail=what))
    with reference_target(req) as reference:
        say(ProgressUpdate("setup", 0, 0, detail="reading server facts"))
        facts = gather_facts(candidate, reference, req)
        prompts = build_prompts(req, facts)
        rounds, seconds = parse_soak(req.soak)
        opts = ParityOptions(
            modes=req.modes, tolerance=req.tolerance, max_new_tokens=req.max_new_tokens, control=req.control,
            copies=req.copies, page_size=facts.page_size, vocab_size=facts.vocab_size, factor=req.factor,
            max_resyncs=req.max_resyncs, soak_rounds=rounds, soak_seconds=seconds,
        )
        say(ProgressUpdate("setup", 0, 0, detail="checking the TP splits (TP controls)"))
        enabled = req.control and req.tp_control
        watchdog = Watchdog(candidate.run_dir)
        with tp_controls(candidate, reference, urls=req.tp_control_urls, enabled=enabled, numerics=req.numerics,
                         timeout=req.launch_timeout) as (controls, tp_info):
            if tp_info.note:
                say(ProgressUpdate("setup", 0, 0, detail=tp_info.note))
            numerics = _numerics(candidate, reference, tp_info, req.numerics)
            calibration = calibration_of(tp_info, numerics)
            left = None if req.deadline_s is None else max(0.0, req.deadline_s - (time.monotonic() - started))
            def judge() -> ParityResult:
                key = (reference.url, *(c.target.url for c in controls))
                base = (baselines or {}).get(key)
                if baselines is not None and (base is None or base.fits(prompts, opts) is not None):
                    base = baselines[key] = measure_baseline(reference, prompts, opts, progress, tp_controls=controls)
                return run_parity(candidate, reference, prompts, opts, progress, tp_controls=controls,
                                  baseline=base, calibration=calibration)

            try:  # the candidate's processes are looked at while the comparisons run: a hang is named in seconds
                result = run_watched(judge, watchdog, doing="parity", deadline_s=left)
            except CheckFailed as exc:  # a request failed: if a process of the run died or hangs, that is the news
                if candidate.run_dir is not None and "the deployment of run" not in exc.message:
                    verdict = watchdog.last_look()
                    if verdict is not None:
                        raise verdict.error(f"parity stopped ({exc.message})") from exc
                raise
        result.numerics = numerics
    result.facts = facts.describe()
    result.settings_from = settings_from
    result.candidate_workers = {"prefill": list(candidate.prefill_urls), "decode": list(candidate.flush_decode)}
    result.tp = tp_info.document()
    result.positions = analyze(result.modes, window=facts.sliding_window, factor=req.factor,
                               max_new_tokens=req.max_new_tokens)
    result.wall_s = time.monotonic() - started  # the whole command: launches, controls, every mode
    result.candidate_lock = lock_pointer(candidate.run_dir)
    result.numerics_notes = numerics_notes(candidate.run_dir)  # e.g. gpt-oss on a CPU node
    return result


def calibration_of(tp_info: TPInfo, numerics: dict[str, Any]) -> Calibration:
    """Whether the floor has the TP controls this comparison needs (pdctl.parity.calibration), in words."""
    if tp_info.calibrated:
        return Calibration(True)
    if tp_info.unknown:
        why = f"the TP splits are unknown ({tp_info.unknown}), so the floor may lack a TP control"
    else:
        why = (f"the floor lacks a TP{'/'.join(map(str, tp_info.missing))} control (candidate attention TP "
               f"{tp_info.candidate.as_list()}, reference {tp_info.reference.as_list()})")
    return Calibration(False, why, tp_info.calibrate_with(),
                       gross_numerics(numerics.get("candidate"), numerics.get("reference")))


def _numerics(candidate: Target, reference: Target, tp_info: TPInfo, asked: str | None) -> dict[str, Any]:
    """What each side computes with, as far as its /server_info says (the reference engine reports it)."""
    def of(target: Target) -> str | None:
        value = (get_json(target.info_url, "/server_info", "/get_server_info") or {}).get("numerics")
        return value if isinstance(value, str) else None

    return {"candidate": of(candidate), "reference": of(reference), "asked": asked,
            "controls": [c.get("numerics") for c in tp_info.controls]}
