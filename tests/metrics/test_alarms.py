"""The stall alarms of `status --watch` on sequences of figures (pure logic; the real reference engine with a
stopped prefill is in tests/launch/test_e2e_incidents.py)."""

from __future__ import annotations

from typing import Any

from pdctl.metrics.alarms import StallDetector, sample_of


def figures(transferring: int | None, kv: float | None = 0.04, ok: int | None = 10, failed: int | None = 0,
            requests: int | None = 10) -> dict[str, Any]:
    """An engine's figures as pdctl.metrics.figures.engine_figures shapes them (ok/failed None: a real SGLang
    server, which exports no transfer counters)."""
    return {"kind": "engine", "window": "interval", "transferring": transferring, "kv_usage": kv,
            "totals": {"transfers_ok": ok, "transfers_failed": failed, "requests": requests}}


def run(samples: list[tuple[float, dict[str, Any] | None]], stall_after: float = 60.0) -> list[list[str]]:
    detector = StallDetector(stall_after)
    return [[a.kind for a in detector.update("decode-0", fig, at)] for at, fig in samples]


def test_requests_in_transfer_that_never_complete_alarm_after_the_window():
    kinds = run([(t, figures(1)) for t in range(0, 80, 2)])
    first = next(i for i, k in enumerate(kinds) if k)
    assert first == 30 and all(k == ["stuck-transfers"] for k in kinds[first:])  # t = 60 s, and stays


def test_transfers_that_complete_do_not_alarm_even_with_a_constant_queue():
    assert not any(run([(t, figures(2, ok=t)) for t in range(0, 200, 2)]))


def test_an_empty_moment_or_a_gap_restarts_the_window():
    samples = [(t, figures(0 if t == 50 else 1)) for t in range(0, 100, 2)]
    assert not any(run(samples))  # empty at 50 s: a new span starts, and 98 - 52 < 60
    gap = [(t, None if t == 40 else figures(1)) for t in range(0, 100, 2)]
    assert not any(run(gap))  # the window restarts after the gap: 98 - 42 < 60
    assert run([(t, figures(1)) for t in range(0, 100, 2)])[-1] == ["stuck-transfers"]  # the control


def test_sglang_server_without_counters_judged_from_the_queue_and_finished_requests():
    stuck = run([(t, figures(3, ok=None, failed=None, requests=7)) for t in range(0, 70, 5)])
    assert stuck[-1] == ["stuck-transfers"]
    busy = run([(t, figures(3, ok=None, failed=None, requests=7 + t)) for t in range(0, 70, 5)])
    assert busy[-1] == []  # requests finish: the queue moves
    varying = run([(t, figures(3 + (t // 5) % 2, ok=None, failed=None, requests=7)) for t in range(0, 70, 5)])
    assert "stuck-transfers" not in varying[-1]


def test_a_growing_queue_with_flat_kv_use_means_kv_is_not_arriving():
    grows = run([(t, figures(1 + t // 20, kv=0.04, ok=t)) for t in range(0, 70, 5)])
    assert grows[-1] == ["kv-not-arriving"]
    filling = run([(t, figures(1 + t // 20, kv=0.04 + t / 1000, ok=t)) for t in range(0, 70, 5)])
    assert filling[-1] == []  # KV use follows the queue: transfers land
    shrinking = run([(t, figures(max(1, 5 - t // 20), ok=t)) for t in range(0, 70, 5)])
    assert shrinking[-1] == []


def test_routers_and_missing_figures_are_not_sampled():
    assert sample_of({"kind": "router", "running": 3}, 0.0) is None
    assert sample_of(None, 0.0) is None
    sample = sample_of(figures(2, ok=3, failed=1), 5.0)
    assert sample is not None and sample.completed == 4 and sample.transferring == 2
