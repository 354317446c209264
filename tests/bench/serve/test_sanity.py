"""The sanity rules of a point (pdctl.bench.serve.sanity), each saying no and yes on the shapes the tool and
pdctl's driver produce. The live proof (each bad run made for real): test_bench_serve_e2e.py."""

from __future__ import annotations

import pytest

from pdctl.bench.serve.metrics import from_tool_result
from pdctl.bench.serve.sanity import RULES, expected_server_counts
from pdctl.bench.serve.sweep import Point
from tests.bench.serve.test_logic import _client, _tool_result

POINT = Point(0, 4, 16, 8, 8)


def _point(*, client: dict | None = None, server: dict | None = None, osl_got: int = 8, exact: bool = True):
    result = _tool_result(POINT.requests, POINT.isl, POINT.osl, out_short=POINT.osl - osl_got)
    return from_tool_result(POINT, result, exact_counts=exact, gpus=1,
                            client=_client(POINT) if client is None else client, server=server)


def _fired(m) -> set[str]:
    return {p.split(":", 1)[0] for p in m.problems if p.split(":", 1)[0] in RULES}


def _server(m, **change: int) -> dict:
    return {"checked": True, "delta": {**expected_server_counts(m, True), **change}}


def test_a_sound_point_passes_every_rule() -> None:
    m = _point()
    m = _point(server=_server(m))
    assert m.ok and m.problems == []


def test_zero_tokens_fails_even_where_counts_are_not_exact() -> None:
    m = _point(osl_got=0, exact=False)
    assert _fired(m) == {"zero-tokens"} and not m.ok


@pytest.mark.parametrize("peak", [0, 1, 3])
def test_concurrency_never_reached_fails(peak: int) -> None:
    m = _point(client=_client(POINT, peak=peak))
    assert _fired(m) == {"concurrency-not-reached"}
    assert f"at most {peak} measured" in m.problems[0]


def test_no_warmup_fails_and_so_does_a_warmup_that_never_succeeded() -> None:
    assert _fired(_point(client=_client(POINT, warm=0))) == {"no-warmup"}
    failed = _client(POINT)
    failed["warmup"]["ok"] = 0
    assert _fired(_point(client=failed)) == {"no-warmup"}


@pytest.mark.parametrize("change", [{"requests": 18}, {"generation_tokens": 1}, {"prompt_tokens": 0}])
def test_servers_that_counted_otherwise_fail(change: dict) -> None:
    m = _point()
    bad = _point(server=_server(m, **change))
    assert _fired(bad) == {"server-disagrees"}
    assert "disagree" in bad.problems[0]


def test_unreadable_server_metrics_are_said_not_failed() -> None:
    m = _point(server={"checked": False, "why": "http://x/metrics: HTTP 404"})
    assert m.ok and m.document()["server"]["why"].endswith("404")


def test_expected_server_counts_include_the_warmup() -> None:
    m = _point()
    assert expected_server_counts(m, True) == {"requests": 9, "prompt_tokens": 9 * 16, "generation_tokens": 9 * 8}
    assert expected_server_counts(m, False) == {"requests": 9}
