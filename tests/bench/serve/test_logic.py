"""Pure logic of `pdctl bench serve`: the sweep grid, counts checks, ratios and the gate, datasets, tokenizer."""

from __future__ import annotations

import json
import math

import pytest

from pdctl.bench.serve import compare, datasets
from pdctl.bench.serve.metrics import PointMetrics, from_tool_result
from pdctl.bench.serve.sweep import Point, build_spec, parse_int_list
from pdctl.errors import UserError


def _tool_result(n: int, isl: int, osl: int, *, ttft: float = 10.0, itl: float = 2.0, failed: int = 0,
                 out_short: int = 0) -> dict:
    """A tool result document shaped like sglang.benchmark.serving's (with --output-details)."""
    doc = {"completed": n - failed, "duration": 2.0, "request_throughput": (n - failed) / 2.0,
           "input_lens": [isl] * n, "output_lens": [osl - out_short] * (n - failed) + [0] * failed,
           "errors": [""] * (n - failed) + ["Traceback\nConnectionError: boom"] * failed}
    for name, base in (("ttft_ms", ttft), ("itl_ms", itl), ("tpot_ms", itl), ("e2e_latency_ms", ttft + osl * itl)):
        doc.update({f"median_{name}": base, f"p90_{name}": base * 1.5, f"p99_{name}": base * 2,
                    f"mean_{name}": base * 1.1})
    return doc


def _client(point: Point, *, peak: int | None = None, warm: int = 1) -> dict:
    """What pdctl's driver reports around the tool's requests (sglang_driver.Recorder.document)."""
    return {"warmup": {"sent": warm, "ok": warm, "prompt_tokens": warm * point.isl,
                       "output_tokens": warm * min(point.osl, 32)},
            "peak_in_flight": point.concurrency if peak is None else peak, "sent": point.requests}


def _metrics(point: Point, **kw) -> PointMetrics:
    return from_tool_result(point, _tool_result(point.requests, point.isl, point.osl, **kw), exact_counts=True,
                            gpus=3, client=_client(point))


def test_grid_is_concurrency_major_with_requests_per_concurrency() -> None:
    spec = build_spec(None, concurrency=(1, 4), isl=(16, 32), osl=(8,))
    points = spec.points()
    assert [p.key for p in points] == [(1, 16, 8), (1, 32, 8), (4, 16, 8), (4, 32, 8)]
    assert [p.requests for p in points] == [8, 8, 16, 16]
    assert [p.index for p in points] == [0, 1, 2, 3]
    assert build_spec(None, concurrency=(2,), isl=(4,), osl=(4,), num_prompts=3).points()[0].requests == 3


def test_topology_defaults_fill_what_the_command_line_leaves_out() -> None:
    from pdctl.topology.bench import BenchServe

    spec = build_spec(BenchServe(concurrency=[2, 3], isl=[100], osl=[7], warmup=0, seed=9), osl=(5, 6))
    assert (spec.concurrency, spec.isl, spec.osl, spec.warmup, spec.seed) == ((2, 3), (100,), (5, 6), 0, 9)


@pytest.mark.parametrize("text", ["1,x", "0", "2,-1", "1,1", ""])
def test_bad_int_lists_are_user_errors(text: str) -> None:
    with pytest.raises(UserError):
        parse_int_list(text, "--concurrency")


@pytest.mark.parametrize("kw", [{"isl": (1,)}, {"warmup": -1}, {"api": "grpc"}, {"request_rate": 0.0},
                                {"num_prompts": 0}])
def test_bad_sweeps_are_user_errors(kw: dict) -> None:
    args = {"concurrency": (1,), "isl": (16,), "osl": (4,), **kw}
    with pytest.raises(UserError):
        build_spec(None, **args)


def test_consistent_point_has_no_problems_and_per_gpu_numbers() -> None:
    m = _metrics(Point(0, 2, 16, 8, 8))
    assert m.ok and m.problems == [] and m.errors == 0
    assert (m.input_tokens, m.output_tokens) == (128, 64)
    assert math.isclose(m.output_tok_s, 32.0) and math.isclose(m.per_gpu(m.output_tok_s), 32.0 / 3)
    assert m.value("ttft_ms.p90") == 15.0 and m.value("request_throughput") == 4.0


def test_counts_that_do_not_match_what_was_sent_are_problems() -> None:
    m = _metrics(Point(0, 2, 16, 8, 8), out_short=1)  # answers one token short: not what was asked
    assert not m.ok and any("output tokens 56 != 8 x 8" in p for p in m.problems)
    wrong_n = from_tool_result(Point(0, 2, 16, 8, 9), _tool_result(8, 16, 8), exact_counts=True, gpus=None)
    assert any("reports 8 requests, 9 were asked" in p for p in wrong_n.problems)
    assert wrong_n.errors == 0 and not wrong_n.ok  # a request never sent is no server error, but not OK either


def test_failed_requests_are_errors_with_a_sample() -> None:
    m = _metrics(Point(0, 2, 16, 8, 8), failed=2)
    assert m.errors == 2 and m.completed == 6 and not m.ok
    assert m.error_samples == ["ConnectionError: boom"]
    assert m.input_tokens == 6 * 16  # failed requests' prompts are not counted as served


def test_a_point_without_result_is_all_errors() -> None:
    m = from_tool_result(Point(0, 1, 16, 8, 5), None, exact_counts=True, gpus=1, failure="warm-up failed")
    assert (m.errors, m.completed, m.error_samples, m.ok) == (5, 0, ["warm-up failed"], False)


def test_unordered_percentiles_and_ttft_over_e2e_are_problems() -> None:
    doc = _tool_result(8, 16, 8)
    doc["p99_itl_ms"] = 0.1
    doc["median_ttft_ms"] = 10_000.0
    doc["p90_ttft_ms"] = doc["p99_ttft_ms"] = 10_000.0
    m = from_tool_result(Point(0, 2, 16, 8, 8), doc, exact_counts=True, gpus=1)
    assert any("itl_ms percentiles are not ordered" in p for p in m.problems)
    assert any("median TTFT exceeds median E2E" in p for p in m.problems)


def test_ratios_and_regressions_have_the_right_direction() -> None:
    point = Point(0, 2, 16, 8, 8)
    cand, ctrl = _metrics(point, ttft=20.0), _metrics(point, ttft=10.0)
    assert compare.ratios(cand, ctrl)["ttft_ms"]["p50"] == 2.0
    assert compare.regression("ttft_ms.p50", cand, ctrl) == pytest.approx(100.0)  # latency doubled: 100% worse
    assert compare.regression("ttft_ms.p50", ctrl, cand) == pytest.approx(-50.0)  # halved: better
    slow = from_tool_result(point, {**_tool_result(8, 16, 8), "duration": 4.0}, exact_counts=True, gpus=3)
    assert compare.regression("output_tok_s", slow, ctrl) == pytest.approx(50.0)  # half the throughput
    assert compare.regression("output_tok_s", ctrl, slow) == pytest.approx(-100.0)
    one_gpu = from_tool_result(point, _tool_result(8, 16, 8), exact_counts=True, gpus=1)
    assert compare.ratios(ctrl, one_gpu)["output_tok_s_per_gpu"] == pytest.approx(1 / 3)  # same tok/s, 3x GPUs
    assert compare.regression("output_tok_s_per_gpu", ctrl, one_gpu) == pytest.approx(200 / 3)


def test_gate_passes_within_the_limit_and_fails_over_it() -> None:
    point = Point(0, 2, 16, 8, 8)
    base = _metrics(point, ttft=10.0)
    assert compare.gate([(_metrics(point, ttft=10.4), base)], ("ttft_ms.p50",), 5.0) == []
    failures = compare.gate([(_metrics(point, ttft=11.0), base)], ("ttft_ms.p50", "output_tok_s"), 5.0)
    assert [(f.metric, round(f.regression_pct or 0)) for f in failures] == [("ttft_ms.p50", 10)]


def test_gate_fails_a_point_it_cannot_compare() -> None:
    point = Point(0, 2, 16, 8, 8)
    failures = compare.gate([(_metrics(point, failed=1), _metrics(point))], ("ttft_ms.p50",), 50.0)
    assert len(failures) == 1 and failures[0].regression_pct is None and "candidate" in failures[0].message


@pytest.mark.parametrize("text,value", [("5%", 5.0), ("0", 0.0), (2.5, 2.5), (None, None)])
def test_percent_parsing(text, value) -> None:
    assert compare.parse_percent(text) == value


@pytest.mark.parametrize("text", ["-1%", "five", "nan", "inf"])
def test_bad_percent_and_metric_names_are_user_errors(text: str) -> None:
    with pytest.raises(UserError):
        compare.parse_percent(text)
    with pytest.raises(UserError, match="unknown metric"):
        compare.parse_metrics("ttft_ms.p50,ttft_p50")


def test_datasets(tmp_path) -> None:
    assert datasets.prepare("random", tmp_path).tool_dataset == "random-ids"
    gsm = datasets.prepare("gsm8k", tmp_path / "g")
    doc = json.loads(gsm.path.read_text())
    assert gsm.prompts == len(doc) == 50 and doc[0]["conversations"][0]["value"].startswith("Janet")
    user = tmp_path / "u.jsonl"
    user.write_text('{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}\n'
                    '{"messages": [{"role": "user", "content": "hey"}]}\n{"text": "plain"}\n')
    assert datasets.prepare(str(user), tmp_path / "u").prompts == 3
    many = datasets.prepare(str(user), tmp_path / "m", records=7)  # the tool sends one request per record
    texts = [r["conversations"][0]["value"] for r in json.loads(many.path.read_text())]
    assert texts == ["hi", "hey", "plain", "hi", "hey", "plain", "hi"]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"nope": 1}\n')
    with pytest.raises(UserError, match=r"bad.jsonl:2"):
        datasets.prepare(str(bad), tmp_path / "b")
    with pytest.raises(UserError, match="not 'random', 'gsm8k'"):
        datasets.prepare(str(tmp_path / "missing.jsonl"), tmp_path)


def test_pareto_front() -> None:
    from pdctl.bench.serve.report import pareto

    pts = [(10.0, 5.0), (20.0, 4.0), (30.0, 9.0), (25.0, 9.5), (5.0, 1.0), (float("nan"), 3.0)]
    assert pareto(pts) == [(5.0, 1.0), (10.0, 5.0), (25.0, 9.5)]


def test_cpu_ranks_are_not_called_gpus_and_no_ratio_without_a_control() -> None:
    """Issue 20: bench serve on the CPU reference engine said "(3 GPUs)", and the report explained a ratio
    that a run without control does not have."""
    from rich.console import Console

    from pdctl.bench.serve.report import render_html
    from pdctl.bench.serve.results import BenchResult
    from pdctl.bench.serve.targets import Side, unit_of
    from pdctl.cli.bench_serve import print_result as render
    from tests.support.topo_factory import make

    cpu, _ = make(nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "cpu", "gpus": 4}],
                  prefill={"nodes": ["p0"]}, decode={"nodes": ["p0"], "tp": 1})
    assert unit_of(cpu) == "CPU rank" and unit_of(make()[0]) == "GPU"
    point = Point(0, 2, 16, 8, 8)
    spec = build_spec(None, concurrency=(2,), isl=(16,), osl=(8,))
    result = BenchResult(tool="t", spec=spec, dataset="random", points=[_metrics(point)],
                         candidate=Side("candidate", "http://c", 3, "http://c", unit="CPU rank"))
    out = Console(record=True, width=200)
    render(result, out)
    text = out.export_text()
    assert "(3 CPU ranks)" in text and "GPU" not in text and "tok/s/rank" in text and "ratio" not in text
    page = render_html(result)
    assert "ratio = " not in page and "3 CPU ranks" in page and "GPUs" not in page and "tok/s/rank" in page
    with_control = BenchResult(tool="t", spec=spec, dataset="random", points=[_metrics(point)],
                               candidate=Side("candidate", "http://c", 8, "http://c"),
                               control=Side("control", "http://k", 1, "http://k"),
                               control_points=[_metrics(point)])
    page = render_html(with_control)
    assert "ratio = candidate / control" in page and "(8 GPUs)" in page and "(1 GPU)" in page
