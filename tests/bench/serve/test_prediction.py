"""Predicted against measured (`bench.predicted`, written by `pdctl suggest --out`): found at its point, ratios
in the measured / predicted direction, targets met or missed, and said so when the sweep missed the point."""

from __future__ import annotations

import pytest

from pdctl.bench.serve.metrics import from_tool_result
from pdctl.bench.serve.prediction import compare
from pdctl.bench.serve.sweep import Point
from pdctl.topology.bench import BenchPredicted
from tests.bench.serve.test_logic import _tool_result

PREDICTED = BenchPredicted.model_validate({
    "source": "pdctl suggest (test)", "concurrency": 2, "isl": 16, "osl": 8, "ttft_ms": 8.0, "itl_ms": 4.0,
    "output_tok_s": 64.0, "targets": {"ttft_ms": 12.0, "itl_ms": 3.0}})


def _point(concurrency: int, isl: int, osl: int):
    p = Point(0, concurrency, isl, osl, 8)
    return from_tool_result(p, _tool_result(8, isl, osl, ttft=10.0, itl=2.0), exact_counts=True, gpus=2)


def test_the_predicted_point_is_compared_and_the_targets_judged() -> None:
    doc = compare(PREDICTED, [_point(1, 16, 8), _point(2, 16, 8)])
    assert doc["measured"] == {"ttft_ms": 10.0, "itl_ms": 2.0, "output_tok_s": 32.0}
    assert doc["ratio"] == {"ttft_ms": pytest.approx(10.0 / 8.0), "itl_ms": pytest.approx(0.5),
                            "output_tok_s": pytest.approx(0.5)}
    assert doc["targets_met"] == {"ttft_ms": True, "itl_ms": True}
    missed = compare(PREDICTED.model_copy(update={"targets": PREDICTED.targets.model_copy(
        update={"ttft_ms": 9.0, "itl_ms": 1.5})}), [_point(2, 16, 8)])
    assert missed["targets_met"] == {"ttft_ms": False, "itl_ms": False}


def test_a_sweep_without_the_predicted_point_says_how_to_measure_it() -> None:
    doc = compare(PREDICTED, [_point(1, 16, 8)])
    assert doc["measured"] is None and doc["ratio"] is None
    assert "--concurrency 2 --isl 16 --osl 8" in doc["note"]
    assert compare(None, [_point(2, 16, 8)]) is None
