"""Unit tests of parity's pure logic: the edge-length suite, comparisons, the verdict and the JSON keys."""

from __future__ import annotations

import json
import math

import pytest

from pdctl.errors import UserError
from pdctl.parity.compare import compare
from pdctl.parity.prompts import (
    Prompt,
    SuiteFacts,
    default_suite,
    facts_from_info,
    load_prompts_file,
    shared_prefix_variant,
    suite_lengths,
)
from pdctl.parity.results import ModeResult, ParityResult

REF_FACTS = SuiteFacts(page_size=16, vocab_size=258, sliding_window=32, context_length=4096)


def _meta(out: list[tuple[float, int]], inp: list[float | None] | None = None, cached: int = 0) -> dict:
    inp = inp if inp is not None else [None, -1.0, -2.0]
    return {
        "prompt_tokens": len(inp),
        "cached_tokens": cached,
        "output_token_logprobs": [[lp, tok, None] for lp, tok in out],
        "input_token_logprobs": [[lp, 100 - len(inp) + i, None] for i, lp in enumerate(inp)],  # ids aligned at the end
    }


def test_suite_lengths_sit_on_page_window_and_context_edges() -> None:
    lengths = suite_lengths(REF_FACTS, max_new_tokens=4)
    values = set(lengths.values())
    assert {15, 16, 17, 32, 64} <= values  # below / at / above one page, exact multiples
    assert {33, 49} <= values  # just past the window, past it by more than a page
    assert max(values) == 4096 - 4 - 1  # long: as long as the context allows
    capped = suite_lengths(REF_FACTS, max_new_tokens=4, max_prompt_tokens=100)
    assert max(capped.values()) == 100
    chunked = suite_lengths(SuiteFacts(page_size=1, chunked_prefill_size=512), max_new_tokens=4)
    assert {512, 513} <= set(chunked.values())


def test_default_suite_is_deterministic_and_within_vocab() -> None:
    a = default_suite(REF_FACTS, max_new_tokens=4, max_prompt_tokens=200)
    b = default_suite(REF_FACTS, max_new_tokens=4, max_prompt_tokens=200)
    assert [p.input_ids for p in a] == [p.input_ids for p in b]
    assert all(0 <= t < 256 for p in a for t in p.input_ids)  # bytes only: never BOS/EOS (256, 257)
    big = default_suite(SuiteFacts(page_size=64, vocab_size=201088), max_new_tokens=4, max_prompt_tokens=300)
    assert all(100 <= t < 1100 for p in big for t in p.input_ids)
    assert [p.num_tokens for p in a] == sorted(p.num_tokens for p in a)


def test_no_room_for_prompts_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no room"):
        suite_lengths(SuiteFacts(context_length=4), max_new_tokens=4)


def test_shared_prefix_variant_keeps_a_page_aligned_prefix() -> None:
    prompt = default_suite(REF_FACTS, max_new_tokens=4, max_prompt_tokens=64)[-1]
    variant = shared_prefix_variant(prompt, page_size=16, vocab_size=258)
    assert variant is not None and len(variant.input_ids) >= 2
    shared = 16 * ((len(prompt.input_ids) - 1) // 16)
    assert variant.input_ids[:shared] == prompt.input_ids[:shared]
    assert variant.input_ids[shared] != prompt.input_ids[shared]
    assert shared_prefix_variant(Prompt("short", input_ids=[40] * 10), page_size=16, vocab_size=258) is None


def test_facts_from_sglang_shaped_and_router_shaped_info() -> None:
    server = {"page_size": 64, "chunked_prefill_size": 8192, "context_length": None, "max_req_input_len": 131000}
    model = {"model_path": "x", "hf_config": {"vocab_size": 201088, "sliding_window": 128}}
    facts = facts_from_info(server, model)
    assert (facts.page_size, facts.chunked_prefill_size, facts.context_length) == (64, 8192, 131000)
    assert (facts.vocab_size, facts.sliding_window) == (201088, 128)
    routed = facts_from_info({"prefill": [{"page_size": 16}], "decode": [{"page_size": 32}]}, None)
    assert routed.page_size == 16 and routed.sources["page_size"] == "/server_info"


def test_prompts_file_accepts_text_and_ids_and_names_bad_lines(tmp_path) -> None:
    good = tmp_path / "p.jsonl"
    good.write_text('{"text": "hello"}\n\n{"input_ids": [1, 2, 3], "name": "ids"}\n', encoding="utf-8")
    prompts = load_prompts_file(good, vocab_size=258)
    assert [(p.name, p.text, p.input_ids) for p in prompts] == [("line1", "hello", None), ("ids", None, [1, 2, 3])]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"input_ids": [1, 999]}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"bad.jsonl:2: token id 999 is outside"):
        load_prompts_file(bad, vocab_size=258)
    bad.write_text("not json\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad.jsonl:1: not valid JSON"):
        load_prompts_file(bad)
    with pytest.raises(UserError, match="cannot read"):
        load_prompts_file(tmp_path / "missing.jsonl")


def test_compare_reports_first_mismatch_and_prefill_attribution() -> None:
    ref = _meta([(-0.5, 7), (-1.0, 8), (-0.2, 9), (-0.3, 10)])
    same = compare(_meta([(-0.5, 7), (-1.01, 8), (-0.2, 9), (-0.3, 10)]), ref, prompt=0, prompt_name="p",
                   label="cold", tolerance=0.05, max_new_tokens=4)
    assert same.passed and same.first_mismatch is None and same.max_abs_delta == pytest.approx(0.01)
    # token differs at position 2: deltas stop there, prefill agrees -> the transfer's fault
    broken = compare(_meta([(-0.5, 7), (-1.0, 8), (-2.0, 3), (-0.1, 4)]), ref, prompt=0, prompt_name="p",
                     label="cold", tolerance=0.05, max_new_tokens=4)
    assert not broken.passed and broken.first_mismatch == 2 and broken.first_token_mismatch == 2
    assert len(broken.deltas) == 3 and not broken.prefill_differs
    # logprob drift beyond tolerance at position 1, and the prompt's own logprobs differ too
    drift = compare(_meta([(-0.5, 7), (-1.2, 8), (-0.2, 9), (-0.3, 10)], inp=[None, -1.3, -2.0]), ref, prompt=0,
                    prompt_name="p", label="warm", tolerance=0.05, max_new_tokens=4)
    assert drift.first_mismatch == 1 and drift.tokens_match and drift.prefill_differs
    assert drift.prefill_max_abs_delta == pytest.approx(0.3)
    # a warm answer with only the tail of the input logprobs is aligned at the end
    tail = compare(_meta([(-0.5, 7), (-1.0, 8), (-0.2, 9), (-0.3, 10)], inp=[-2.0], cached=16), ref, prompt=0,
                   prompt_name="p", label="warm", tolerance=0.05, max_new_tokens=4, expect_cached=True)
    assert tail.passed and tail.prefill_max_abs_delta == 0.0
    nocache = compare(ref, ref, prompt=0, prompt_name="p", label="warm", tolerance=0.05, max_new_tokens=4,
                      expect_cached=True)
    assert not nocache.passed and "cached_tokens = 0" in nocache.reason


def _comp(delta: float, *, prefill: bool = False, tokens_match: bool = True, passed: bool | None = None):
    ref = _meta([(-0.5, 7)])
    cand = _meta([(-0.5 - delta, 7 if tokens_match else 6)], inp=[None, -1.0 - (1.0 if prefill else 0), -2.0])
    return compare(cand, ref, prompt=0, prompt_name="p", label="x", tolerance=0.05, max_new_tokens=1)


def test_verdict_cold_fails_warm_failures_explained_by_prefill_or_control() -> None:
    cold = ModeResult("cold", [_comp(0.2, prefill=True)])
    warm = ModeResult("warm", [_comp(0.2, prefill=True), _comp(0.08)], control=[_comp(0.1), _comp(0.0)])
    conc = ModeResult("concurrent", [_comp(0.3)], control=[_comp(0.1)])
    for mode in (cold, warm, conc):
        mode.explain(vouched={0})  # as if prompt 0's cold comparison had passed in this run
    assert not cold.ok  # cold failures are never explained away
    assert [c.explained_by for c in warm.failures] == ["prefill_differs", "control"] and warm.ok
    assert warm.control_floor == pytest.approx(0.1)
    assert not conc.ok and conc.unexplained[0].max_abs_delta == pytest.approx(0.3)
    result = ParityResult(modes={"cold": cold, "warm": warm, "concurrent": conc}, tolerance=0.05, max_new_tokens=1)
    doc = json.loads(json.dumps(result.document(), allow_nan=False))
    assert doc["ok"] is False and doc["tolerance"] == 0.05 and doc["max_new_tokens"] == 1
    for mode in ("cold", "warm", "concurrent"):
        assert {"compared", "passed", "failures"} <= set(doc["modes"][mode])
    failure = doc["modes"]["cold"]["failures"][0]
    assert list(failure)[:6] == ["prompt", "prompt_tokens", "first_mismatch", "max_abs_delta", "prefill_differs",
                                 "cached_tokens"]
    assert failure["first_mismatch"] == 0 and failure["prefill_differs"] is True
    assert doc["modes"]["warm"]["control"]["floor"] == pytest.approx(0.1)


def test_unmeasurable_delta_is_null_in_json() -> None:
    ref = _meta([(-0.5, 7), (-0.6, 8)])
    short = compare(_meta([(-0.5, 7)]), ref, prompt=0, prompt_name="p", label="cold", tolerance=0.05,
                    max_new_tokens=2)
    assert not short.passed and short.first_mismatch == 1
    missing = compare({"output_token_logprobs": [[None, 7, None], [-0.6, 8, None]]}, ref, prompt=0,
                      prompt_name="p", label="cold", tolerance=0.05, max_new_tokens=2)
    assert math.isinf(missing.max_abs_delta)
    mode = ModeResult("cold", [missing])
    mode.explain()
    assert json.loads(json.dumps(mode.document(), allow_nan=False))["failures"][0]["max_abs_delta"] is None


def test_html_report_embeds_a_png_plot(tmp_path) -> None:
    import base64
    import re

    from pdctl.parity.report import write_report

    warm = ModeResult("warm", [_comp(0.02), _comp(0.08)], control=[_comp(0.1)])
    cold = ModeResult("cold", [_comp(0.0)])
    for mode in (cold, warm):
        mode.explain(vouched={0})
    result = ParityResult(modes={"cold": cold, "warm": warm}, tolerance=0.05, max_new_tokens=1,
                          candidate="http://c", reference="http://r")
    page = write_report(result, tmp_path / "r.html").read_text(encoding="utf-8")
    png = re.search(r'id="plot"[^>]*src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    assert png and base64.b64decode(png.group(1)).startswith(b"\x89PNG\r\n\x1a\n")
    assert 'id="verdict">PASS<' in page and "explained (control)" in page
    with pytest.raises(UserError, match="cannot write --report"):
        write_report(result, tmp_path / "missing-dir" / "r.html")


def test_an_errored_control_send_does_not_explain_failures() -> None:
    from pdctl.parity.runner import _errored

    errored = _errored(0, Prompt("p", input_ids=[1, 2]), "control", {"prompt_tokens": 2}, "HTTP 503")
    conc = ModeResult("concurrent", [_comp(0.3)], control=[errored, _comp(0.0)])
    conc.explain()
    assert conc.control_floor == 0.0 and conc.control_failed and not conc.ok


def test_prefill_differs_explains_only_what_a_passing_cold_comparison_vouches_for() -> None:
    """--warm alone (or a failed cold) must not let a prefill on wrong weights explain its own failures."""
    for vouched in ((), {1}):  # no cold run at all; cold passed for another prompt only
        warm = ModeResult("warm", [_comp(0.2, prefill=True)])
        warm.explain(vouched=vouched)
        assert not warm.ok and warm.unexplained[0].explained_by is None
        assert "no cold comparison of this prompt passed" in warm.unexplained[0].unexplained_because
    warm = ModeResult("warm", [_comp(0.2, prefill=True)])
    warm.explain(vouched={0})
    assert warm.ok and warm.failures[0].explained_by == "prefill_differs"
    doc = json.loads(json.dumps(ParityResult(modes={"warm": warm}, tolerance=0.05, max_new_tokens=1).document()))
    assert doc["ok"] is True


def test_runner_vouches_only_with_passing_cold_comparisons(monkeypatch) -> None:
    """The run's verdict end to end over a fake transport: a candidate whose prefill differs fails --warm alone."""
    from pdctl.parity import runner
    from pdctl.target import Target

    good = _meta([(-0.5, 7)])
    bad = _meta([(-0.9, 7)], inp=[None, -2.0, -2.0])  # prefill logits differ, beyond tolerance

    def fake_generate(url, prompt, *, max_new_tokens, logprob_start_len=0):
        return dict(bad if url == "http://cand" else good)

    monkeypatch.setattr(runner.client, "generate", fake_generate)
    monkeypatch.setattr(runner.client, "flush_cache", lambda url: None)
    prompts = [Prompt("p", input_ids=[40] * 3)]
    opts = runner.ParityOptions(modes=("warm",), max_new_tokens=1, control=False, page_size=16)
    result = runner.run_parity(Target("http://cand"), Target("http://ref"), prompts, opts)
    assert not result.ok and result.modes["warm"].unexplained
    both = runner.run_parity(Target("http://cand"), Target("http://ref"), prompts,
                             runner.ParityOptions(modes=("cold", "warm"), max_new_tokens=1, control=False))
    assert not both.ok and not both.modes["cold"].ok  # the cold run catches it: nothing vouches for warm
    assert both.modes["warm"].unexplained


def test_the_report_of_a_pass_is_not_flat_and_says_yes_no() -> None:
    """Issue 20: the report of a passing run plotted every |Δ| (1e-17) on a flat line at 0 of a linear axis up
    to the tolerance, and its tables printed Python's True/False."""
    pytest.importorskip("matplotlib")
    from dataclasses import replace

    from pdctl.parity.report import plot_figure, render_html

    tiny = [replace(_comp(0.0), deltas=[d], max_abs_delta=d) for d in (2.7e-17, 5.5e-17, 0.0)]  # float rounding
    result = ParityResult({"cold": ModeResult("cold", tiny)}, tolerance=0.05, max_new_tokens=1)
    assert result.ok
    ax = plot_figure(result).axes[0]
    assert ax.get_yscale() == "log"
    low, high = ax.get_ylim()
    assert low < 2.7e-17 / 5 and high >= 0.05  # the deltas sit decades under the tolerance line, visibly apart
    page = render_html(result)
    assert "True" not in page and "False" not in page and ">no (" in page
