"""Unit tests of the noise floor's pure logic: the divergence statistic, teacher forcing, the verdict against
the floor, the soak's trend, the position-resolved report, TP splits and the long-context suite. (The real
thing — servers, transfers, corruptions — is tested in test_parity_floor.py.)"""

from __future__ import annotations

import math

import pytest

from pdctl.errors import UserError
from pdctl.parity.calibration import GROSS_FACTOR, MEASURED_TP_FLOOR, Calibration, gross_numerics
from pdctl.parity.compare import KL_CAP, compare
from pdctl.parity.controls import control_argv, needed_tps
from pdctl.parity.divergence import Scored, position_stat, quantile, summarize, topk_kl
from pdctl.parity.floor import Floor, explain, verdict_numbers
from pdctl.parity.positions import analyze, band_edges
from pdctl.parity.prompts import Prompt, SuiteFacts, suite_lengths
from pdctl.parity.results import ModeResult, ParityResult
from pdctl.parity.session import numerics_overrides
from pdctl.parity.soak import SoakResult, SoakRound, mann_kendall, parse_soak
from pdctl.parity.splits import Split, attention_tp
from pdctl.parity.teacher import force, reference_sequence
from pdctl.topology import load_topology


def _meta(tokens: list[int], lps: list[float], *, second: float = -3.0, prompt_tokens: int = 3) -> dict:
    """A meta_info with top-2 per position: the token, and token+100 at SECOND."""
    return {
        "prompt_tokens": prompt_tokens,
        "output_token_logprobs": [[lp, t, None] for lp, t in zip(lps, tokens)],
        "output_top_logprobs": [[[lp, t, None], [second, t + 100, None]] for lp, t in zip(lps, tokens)],
        "input_token_logprobs": [[None, 40, None]] + [[-1.0, 40, None]] * (prompt_tokens - 1),
    }


def _comparison(cand: dict | str, ref: dict, *, prompt_tokens: int = 3, label: str = "cold", resend=None):
    prompt = Prompt("p", input_ids=[40] * prompt_tokens)
    seq = reference_sequence(prompt, ref)
    return compare(force(cand, seq, resend), ref, seq, prompt=0, prompt_name=f"p{prompt_tokens}", label=label,
                   tolerance=0.05, max_new_tokens=len(seq.tokens))


def test_topk_kl_is_zero_for_equal_distributions_and_grows_with_the_difference() -> None:
    ref = {1: -0.1, 2: -2.5}
    assert topk_kl(ref, dict(ref)) == pytest.approx(0.0, abs=1e-12)
    small, large = topk_kl(ref, {1: -0.12, 2: -2.4}), topk_kl(ref, {1: -1.5, 2: -0.3})
    assert 0 < small < large
    # the reference's token missing from the other's top-k: bounded by the other's k-th logprob, finite
    assert 0 < topk_kl(ref, {3: -0.05, 2: -3.5}) < math.inf
    assert topk_kl(ref, {}) == math.inf and topk_kl({}, ref) == 0.0


def test_position_stat_bounds_delta_when_the_token_fell_out_of_the_top_k() -> None:
    other = Scored(token=3, ref_logprob=None, top={3: -0.1, 4: -4.0})
    stat = position_stat(5, 100, ref_token=1, ref_logprob=-0.2, ref_top={1: -0.2}, other=other)
    assert stat.sequence_position == 105 and stat.flip and stat.delta == pytest.approx(3.8)
    gone = position_stat(0, 10, 1, -0.2, {1: -0.2}, Scored(None, None, {}))
    assert math.isinf(gone.delta) and math.isinf(gone.kl) and not gone.measured and not gone.flip


def test_quantiles_and_summary_use_every_position() -> None:
    assert quantile([0.0, 1.0, 2.0, 3.0], 0.5) == pytest.approx(1.5) and quantile([], 0.9) == 0.0
    stats = [position_stat(i, 0, 1, -0.1, {1: -0.1}, Scored(1, -0.1 - 0.01 * i, {1: -0.1 - 0.01 * i}))
             for i in range(10)]
    summary = summarize(stats)
    assert summary.positions == 10 and summary.flips == 0
    assert summary.delta_quantiles["p50"] == pytest.approx(0.045) and summary.max_delta == pytest.approx(0.09)


def test_resends_stop_at_the_cap_and_the_rest_is_not_measured() -> None:
    ref = _meta([7, 8, 9, 10], [-0.1] * 4)
    calls = []

    def always_flips(ids, n):
        calls.append(n)
        return _meta([5] * n, [-0.1] * n)

    prompt = Prompt("p", input_ids=[40] * 3)
    forced = force(_meta([5, 5, 5, 5], [-0.1] * 4), reference_sequence(prompt, ref), always_flips, max_resyncs=2)
    assert forced.capped and forced.resyncs == 2 and calls == [3, 2]
    assert [s.measured for s in forced.scored] == [True, True, True, False]
    comp = _comparison(_meta([5, 5, 5, 5], [-0.1] * 4), ref, resend=always_flips)
    assert not comp.passed and not comp.hard_failure and comp.score > 1  # far beyond any noise
    short = _comparison(_meta([7, 8], [-0.1] * 2), ref)
    assert short.hard_failure and "fewer tokens" in short.reason
    failed = _comparison(_meta([7, 5, 9, 10], [-0.1] * 4), ref, resend=lambda ids, n: "HTTP 500")
    assert failed.hard_failure and "resend after a flip at position 1 failed" in failed.reason


def _noisy(eps: float, tokens: int = 8, prompt_tokens: int = 3, flip_at: int | None = None) -> object:
    """A comparison whose logprobs differ from the reference's by EPS at every position."""
    ref = _meta(list(range(10, 10 + tokens)), [-0.3] * tokens, second=-1.5, prompt_tokens=prompt_tokens)
    toks = list(range(10, 10 + tokens))
    if flip_at is not None:
        toks[flip_at] = 999
    cand = _meta(toks, [-0.3 - eps] * tokens, second=-1.5 + eps, prompt_tokens=prompt_tokens)
    return _comparison(cand, ref, prompt_tokens=prompt_tokens)


def test_the_floor_explains_noise_up_to_factor_times_its_level_and_never_a_hard_failure() -> None:
    floor = Floor(["tp2 control"], [_noisy(0.2), _noisy(0.1)], factor=4.0)
    assert floor.level == pytest.approx(max(c.score for c in floor.comparisons)) and floor.level > 0
    noise, corrupt = _noisy(0.25), _noisy(2.0)
    errored = _comparison("HTTP 503", _meta([1], [-0.1]))
    explain([noise, corrupt, errored], floor, mode="cold")
    assert noise.explained_by == "floor"
    assert corrupt.explained_by is None and "x the floor" in corrupt.unexplained_because
    assert errored.explained_by is None and "no noise explains it" in errored.unexplained_because
    numbers = verdict_numbers([noise, corrupt], floor)
    assert numbers["margin"] == pytest.approx(floor.threshold / corrupt.score) and numbers["margin"] < 1
    assert verdict_numbers([noise], floor)["margin"] > 1
    # exact numerics: a floor of 0 explains nothing beyond the tolerance
    zero = Floor(["reference (itself)"], [_noisy(0.0)])
    drift = _noisy(0.2)
    explain([drift], zero, mode="cold")
    assert zero.level == 0.0 and drift.explained_by is None


def test_soak_values_rounds_or_durations() -> None:
    assert parse_soak("20") == (20, None) and parse_soak("10m") == (None, 600.0) and parse_soak("90s") == (None, 90.0)
    assert parse_soak(None) == (None, None)
    for bad in ("0", "ten", "5d", "-3"):
        with pytest.raises(UserError, match="--soak"):
            parse_soak(bad)


def _round(index: int, eps: float, *, served: int = 0) -> SoakRound:
    comps = [_noisy(eps), _noisy(eps * 0.9)]
    return SoakRound(index, served, comps)


def test_soak_fails_on_a_round_beyond_the_floor_or_a_growing_divergence() -> None:
    floor = Floor(["reference (itself)"], [_noisy(0.3), _noisy(0.25)], factor=4.0)
    steady = SoakResult([_round(i + 1, 0.2 if i % 2 else 0.22, served=20 * i) for i in range(8)], floor)
    for r in steady.rounds:
        explain(r.comparisons, floor, mode="concurrent")
    assert steady.ok and not steady.drifting and steady.first_bad_round is None
    # the divergence grows steadily with served requests, above the floor's typical score, yet below the threshold
    growing = SoakResult([_round(i + 1, 0.05 * (i + 1), served=20 * i) for i in range(10)], floor)
    for r in growing.rounds:
        explain(r.comparisons, floor, mode="concurrent")
    tau, p = growing.trend
    assert tau == pytest.approx(1.0) and p < 1e-3 and growing.drifting and not growing.ok
    assert "grows with served requests" in growing.reason()
    broken = SoakResult([_round(1, 0.2), _round(2, 3.0, served=20)], floor)
    for r in broken.rounds:
        explain(r.comparisons, floor, mode="concurrent")
    assert broken.first_bad_round == 2 and not broken.ok and "after 20 requests" in broken.reason()
    assert mann_kendall([3.0, 2.0, 1.0])[1] > 0.5  # decreasing: no evidence of growth


def test_position_report_finds_the_onset_and_where_it_lies() -> None:
    short = [_noisy(0.1, prompt_tokens=n) for n in (15, 33, 64, 145)]
    long = [_noisy(2.0, prompt_tokens=300)]
    floor = Floor(["tp2 control"], [_noisy(0.1, prompt_tokens=n) for n in (15, 33, 64, 145, 300)])
    mode = ModeResult("cold", short + long, floor)
    mode.explain()
    doc = analyze({"cold": mode}, window=32, factor=4.0, max_new_tokens=8)
    assert doc["first_divergent_position"] == 300 and doc["covered_up_to"] == 308
    assert doc["longest_clean_prompt_below"] == 145 and doc["shortest_diverging_prompt"] == 300
    assert "tied to a sequence position" in doc["layer_window"] and "past the first sliding window" in doc["where"]
    bands = {(b["from"], b["to"]): b for b in doc["bands"]["cold"]}
    assert bands[(256, 512)]["beyond_floor"] and not bands[(0, 32)]["beyond_floor"]
    assert band_edges(300, 32) == [0, 32, 64, 128, 256, 512] and band_edges(100, None) == [0, 64, 128]
    window = ModeResult("cold", [_noisy(0.1, prompt_tokens=15), _noisy(2.0, prompt_tokens=33)], floor)
    window.explain()
    assert "sliding-window KV" in analyze({"cold": window}, window=32, factor=4.0, max_new_tokens=8)["layer_window"]
    clean = ModeResult("cold", short, floor)
    clean.explain()
    assert analyze({"cold": clean}, window=32, factor=4.0, max_new_tokens=8)["first_divergent_position"] is None


def test_tp_controls_are_needed_only_when_the_attention_tp_split_differs() -> None:
    assert attention_tp({"tp_size": 8, "dp_size": 4, "enable_dp_attention": True}) == 2
    assert attention_tp({"prefill": [{"tp_size": 2}]}) == 2 and attention_tp({}) is None
    colocated1 = Split(1, 1)
    assert needed_tps(Split(1, 2), colocated1) == [2] and needed_tps(Split(2, 1), colocated1) == [2]
    assert needed_tps(Split(1, 1), colocated1) == [] and needed_tps(Split(2, 1), Split(2, 1)) == []
    assert needed_tps(Split(2, 4), colocated1) == [2, 4] and needed_tps(Split(None, 2), colocated1) == []
    info = {"model_path": "/m", "page_size": 16, "chunked_prefill_size": 48, "numerics": "exact",
            "disable_hybrid_swa_memory": True, "role": "prefill", "tp_size": 1}
    argv = control_argv(info, tp=2, numerics="gpu-like", port_file="/tmp/p.json")
    assert argv[argv.index("--tp") + 1] == "2" and argv[argv.index("--role") + 1] == "colocated"
    assert argv[argv.index("--numerics") + 1] == "gpu-like" and "--disable-hybrid-swa-memory" in argv
    assert argv[argv.index("--chunked-prefill-size") + 1] == "48"
    with pytest.raises(UserError, match="model_path"):
        control_argv({}, tp=2, numerics=None, port_file="/tmp/p.json")


def test_long_context_prompts_reach_the_context_and_still_obey_the_cap() -> None:
    facts = SuiteFacts(page_size=16, vocab_size=258, sliding_window=32, context_length=4096)
    lengths = suite_lengths(facts, max_new_tokens=32)
    long = sorted(v for v in lengths.values() if v > 4 * 32)
    assert long == [145, 1160, 4063]  # past 4 windows, x8, as long as the context allows (prompt + 32 fit)
    big = suite_lengths(SuiteFacts(page_size=64, sliding_window=128, context_length=131072,
                                   chunked_prefill_size=8192), max_new_tokens=32)
    assert {8193, 131072 - 33} <= set(big.values()) and sum(v > 4 * 128 for v in big.values()) >= 4
    capped = suite_lengths(facts, max_new_tokens=32, max_prompt_tokens=300)
    assert max(capped.values()) == 300 and 145 in capped.values()


def test_a_baseline_refuses_a_run_it_was_not_measured_for() -> None:
    from pdctl.parity.runner import Baseline, ParityOptions

    prompts = [Prompt("a", input_ids=[1, 2, 3])]
    base = Baseline(prompts, ParityOptions(modes=("cold",)), ["reference (itself)"], floors={"cold": Floor([])})
    assert base.fits(prompts, ParityOptions(modes=("cold",))) is None
    assert "other prompts" in base.fits([Prompt("b", input_ids=[1])], ParityOptions(modes=("cold",)))
    assert "max_new_tokens" in base.fits(prompts, ParityOptions(modes=("cold",), max_new_tokens=8))
    assert "no floor for concurrent" in base.fits(prompts, ParityOptions(modes=("cold", "concurrent")))
    assert KL_CAP > 1


def test_with_a_floor_prefill_differs_only_beyond_what_the_controls_prefill_differs() -> None:
    """Another TP split rounds the prompt's own logits otherwise too: that alone is not "prefill differed"."""
    ref = _meta([7, 8], [-0.3, -0.3])

    def with_prefill(delta: float):
        cand = _meta([7, 8], [-0.5, -0.5])
        cand["input_token_logprobs"] = [[None, 40, None]] + [[-1.0 - delta, 40, None]] * 2
        return _comparison(cand, ref)

    tp_noise = Floor(["tp2 control"], [with_prefill(0.2)])
    rounding, broken = with_prefill(0.3), with_prefill(2.0)
    assert rounding.prefill_differs and broken.prefill_differs  # both beyond the kit's tolerance
    explain([rounding, broken], tp_noise, mode="cold")
    assert not rounding.prefill_differs and broken.prefill_differs
    assert rounding.prefill_max_abs_delta == pytest.approx(0.3)  # the measurement itself is kept


def test_numerics_is_set_on_every_server_of_a_reference_topology() -> None:
    """--numerics reaches the launched reference as `--set` overrides (role args win over server args, so each
    role gets it too); a topology of another engine is bad input."""
    pd = numerics_overrides("configs/local-cpu.yaml", "exact")  # its server.args say gpu-like
    topo = load_topology("configs/local-cpu.yaml", pd)
    assert topo.prefill.args["numerics"] == topo.decode.args["numerics"] == "exact"
    assert numerics_overrides("configs/local-cpu-reference.yaml", "gpu-like") == (
        "server.args.numerics=gpu-like", "colocated.args.numerics=gpu-like")
    assert numerics_overrides("configs/local-cpu.yaml", None) == ()
    with pytest.raises(UserError, match="applies to the reference engine"):
        numerics_overrides("configs/gpt-oss-20b-p2-d1-h100-nixl.yaml", "exact")


def _flipping(tokens: int = 8) -> object:
    """A candidate whose greedy token differs from the reference's at every position, resends included."""
    ref = _meta(list(range(10, 10 + tokens)), [-0.3] * tokens, second=-1.5)
    return _comparison(_meta([999] * tokens, [-0.3] * tokens), ref,
                       resend=lambda ids, n: _meta([999] * n, [-0.3] * n))


def test_a_floor_without_the_control_it_needs_is_not_calibrated_unless_gross() -> None:
    """Issue 35: beyond a floor that lacks a TP control, a difference TP rounding could cause is "not calibrated",
    never FAILED; token flips at the first positions, a divergence far above any TP floor measured for the
    numerics, or a hard failure still fail."""
    floor = Floor(["reference (itself)"], [_noisy(0.0)])  # 0: what a deterministic reference shows against itself
    missing = Calibration(False, "the floor lacks a TP2 control", "pass --tp-control URL", numerics="gpu-like")
    assert missing.gross_score == pytest.approx(GROSS_FACTOR * MEASURED_TP_FLOOR["gpu-like"])
    rounding, flipped, far = _noisy(0.2), _flipping(), _noisy(3.0)
    errored = _comparison("HTTP 503", _meta([1], [-0.1]))
    assert rounding.score < missing.gross_score < far.score and not (rounding.passed or far.passed)
    mode = ModeResult("cold", [rounding, flipped, far, errored], floor, missing)
    mode.explain()
    assert mode.uncalibrated == [rounding] and "not calibrated" in rounding.unexplained_because
    assert "flip at 5 of the first 5" in flipped.unexplained_because and "x the largest TP floor" in far.unexplained_because
    assert mode.unexplained == [flipped, far, errored] and mode.verdict == "FAILED"
    clean = ModeResult("cold", [_noisy(0.2), _noisy(0.01)], floor, missing)
    clean.explain()
    assert clean.verdict == "NOT CALIBRATED" and not clean.ok and not clean.unexplained
    assert clean.document()["uncalibrated"] == 1 and clean.document()["failures"]  # every measurement is kept
    # numerics pdctl has not measured (SGLang on GPUs): no divergence bound, only early flips fail
    unknown = Calibration(False, "why", "how", numerics=None)
    assert unknown.gross_score is None and unknown.gross(_noisy(3.0)) is None and unknown.gross(_flipping())
    # exact numerics: a TP control stays within the tolerance, so any difference beyond it is not TP rounding
    assert "where a TP control stays within it" in Calibration(False, numerics="exact").gross(_noisy(0.2))
    # calibrated: the floor's verdict stands as it is
    calibrated = ModeResult("cold", [_noisy(0.2)], floor, Calibration(True))
    calibrated.explain()
    assert calibrated.verdict == "FAILED"


def test_the_run_verdict_is_the_worst_of_its_modes_and_failed_beats_not_calibrated() -> None:
    floor = Floor(["reference (itself)"], [_noisy(0.0)])
    missing = Calibration(False, "why", "how", numerics="gpu-like")
    modes = {"cold": ModeResult("cold", [_noisy(0.2)], floor, missing),
             "warm": ModeResult("warm", [_noisy(0.0)], floor, missing)}
    for mode in modes.values():
        mode.explain()
    result = ParityResult(modes=modes, tolerance=0.05, max_new_tokens=8, calibration=missing)
    doc = result.document()
    assert result.verdict == "NOT CALIBRATED" and not result.ok and doc["verdict"] == "NOT CALIBRATED"
    assert doc["calibration"]["calibrate_with"] == "how" and doc["modes"]["warm"]["verdict"] == "OK"
    modes["warm"] = ModeResult("warm", [_flipping()], floor, missing)
    modes["warm"].explain()
    assert ParityResult(modes=modes, tolerance=0.05, max_new_tokens=8).verdict == "FAILED"
    assert gross_numerics("gpu-like", "gpu-like") == "gpu-like" and gross_numerics("gpu-like", None) is None
    assert gross_numerics("exact", "gpu-like") == "gpu-like" and gross_numerics("exact", "other") is None
