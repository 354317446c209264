"""The bottleneck rules (pdctl.metrics.bottleneck) on figures shaped as pdctl.metrics.figures makes them: each
verdict said yes on its condition and no on a healthy, idle or lightly loaded deployment, and the field's
mistakes avoided. The live proof (each condition built on CPU): tests/launch/test_e2e_bottleneck.py."""

from __future__ import annotations

from pdctl.metrics import names as N
from pdctl.metrics.bottleneck import judge, sample_of
from pdctl.metrics.figures import engine_figures
from pdctl.metrics.scrape import parse


def _fig(running=0, queued=0, rps=0.0, kv=0.1, ttft=None, xfer=None, xfers=0, retracted=0) -> dict:
    return {"kind": "engine", "window": "interval", "running": running, "queued": queued, "requests_per_s": rps,
            "prompt_tokens_per_s": rps * 100, "generation_tokens_per_s": rps * 50, "kv_usage": kv,
            "retracted": retracted, "ttft_ms": None if ttft is None else {"p50": ttft, "count": 5},
            "kv_transfer_ms": None if xfer is None else {"p50": xfer, "count": xfers}}


def _sample(prefill: dict, decode: dict, router: dict | None = None):
    procs = [{"role": "prefill", "node": "a", "metrics": prefill}, {"role": "decode", "node": "b", "metrics": decode}]
    return sample_of(procs, {"metrics": router} if router else None)


HEALTHY_PD = _sample(_fig(running=1, rps=3.0, xfer=4.0, xfers=6), _fig(running=12, rps=3.0, kv=0.4, ttft=80.0))


def test_a_healthy_loaded_pd_deployment_has_no_bottleneck() -> None:
    # decode holds every request for its whole generation: 12 running there vs 1 on prefill is health, not a
    # prefill/decode imbalance (the ratio rule the field got wrong)
    v = judge([HEALTHY_PD] * 3)
    assert v.verdict == "none" and v.role is None and "decode: 12 running" in v.evidence[0]
    assert v.roles == {"prefill": {"verdict": "none", "evidence": []}, "decode": {"verdict": "none", "evidence": []}}


def test_idle_and_lightly_loaded_say_so() -> None:
    idle = _sample(_fig(), _fig())
    assert judge([idle] * 3).verdict == "idle"
    light = _sample(_fig(running=0, rps=0.5, xfer=3.0, xfers=1), _fig(running=1, rps=0.5, ttft=60.0))
    assert judge([light] * 3).verdict == "none"


def test_too_few_samples_is_not_enough_data() -> None:
    assert judge([]).verdict == "not enough data"
    assert judge([HEALTHY_PD]).verdict == "not enough data"


def test_kv_bound_needs_a_full_pool_and_waiting_requests() -> None:
    full = _sample(_fig(running=1, rps=2.0), _fig(running=3, queued=5, rps=2.0, kv=0.97, ttft=900.0))
    v = judge([full] * 2)
    assert (v.verdict, v.role) == ("kv-bound", "decode") and "97% used (nearly full)" in v.evidence[0]
    assert judge([_sample(_fig(running=1, rps=2.0), _fig(running=3, kv=0.97, rps=2.0))] * 2).verdict == "none"
    # decode admits by reserved room: a queue there with the pool half used is still KV (measured live: 53%)
    reserved = _sample(_fig(running=1, rps=2.0), _fig(running=3, queued=2, kv=0.53, rps=2.0))
    v = judge([reserved] * 2)
    assert (v.verdict, v.role) == ("kv-bound", "decode") and "53% used (admission reserves" in v.evidence[0]
    retracting = _sample(_fig(running=1, rps=2.0), _fig(running=3, kv=0.95, rps=2.0, retracted=2))
    assert judge([retracting] * 2).verdict == "kv-bound"


def test_one_spike_is_not_a_bottleneck() -> None:
    full = _sample(_fig(running=1, rps=2.0), _fig(running=3, queued=5, rps=2.0, kv=0.97))
    assert judge([HEALTHY_PD, full, HEALTHY_PD]).verdict == "none"


def test_transfer_bound_by_its_share_of_ttft() -> None:
    slow = _sample(_fig(running=1, rps=2.0, xfer=700.0, xfers=8), _fig(running=4, rps=2.0, ttft=1000.0))
    v = judge([slow] * 2)
    assert (v.verdict, v.role) == ("transfer-bound", "prefill") and "70% of decode's TTFT" in v.evidence[0]
    few = _sample(_fig(running=1, rps=2.0, xfer=700.0, xfers=1), _fig(running=4, rps=2.0, ttft=1000.0))
    assert judge([few] * 2).verdict == "none"  # one transfer is no evidence


def test_queue_bound_at_the_router_only_when_workers_have_room() -> None:
    limited = _sample(_fig(running=1, rps=1.0), _fig(running=2, rps=1.0, kv=0.2), {"refused": 6, "running": 2})
    v = judge([limited] * 2)
    assert (v.verdict, v.role) == ("queue-bound", "router") and "turned 6 request(s) away" in v.evidence[0]
    busy = _sample(_fig(running=1, rps=1.0), _fig(running=1, queued=4, kv=0.2, rps=1.0), {"refused": 6, "running": 5})
    assert judge([busy] * 2).verdict == "kv-bound"  # the workers' own queue: not the router's
    unlimited = _sample(_fig(running=1, rps=1.0), _fig(running=2, rps=1.0, kv=0.2), {"refused": None, "running": 2})
    assert judge([unlimited] * 2).verdict == "none"


def test_router_refusals_are_read_from_its_limiter_counter() -> None:
    from pdctl.metrics.figures import router_figures

    before = parse('smg_http_rate_limit_total{result="allowed"} 2\nsmg_http_rate_limit_total{result="rejected"} 6\n',
                   0.0)
    after = parse('smg_http_rate_limit_total{result="allowed"} 4\nsmg_http_rate_limit_total{result="rejected"} 9\n',
                  1.0)
    assert router_figures(after, before)["refused"] == 3 and router_figures(after)["refused"] == 9
    assert router_figures(parse("smg_http_connections_active 0\n", 1.0), None)["refused"] is None


def test_a_role_that_queues_with_kv_room_is_bound_by_itself() -> None:
    s = _sample(_fig(running=2, queued=6, rps=1.0, kv=0.3), _fig(running=2, rps=1.0, kv=0.2))
    v = judge([s] * 2)
    assert (v.verdict, v.role) == ("prefill-bound", "prefill")


def test_every_dp_rank_counts() -> None:
    # SGLang adds dp_rank labels under DP attention: reading one series would see half of each figure
    labels = 'model_name="m",engine_type="decode",tp_rank="0",pp_rank="0"'
    text = "".join(f'{N.QUEUED}{{{labels},dp_rank="{r}"}} 3\n{N.RUNNING}{{{labels},dp_rank="{r}"}} 4\n'
                   f'{N.TOKEN_USAGE}{{{labels},dp_rank="{r}"}} {0.5 + r * 0.45}\n' for r in (0, 1))
    for le, count in (("0.1", 0), ("0.2", 2), ("+Inf", 2)):
        text += "".join(f'{N.TTFT}_bucket{{{labels},dp_rank="{r}",le="{le}"}} {count}\n' for r in (0, 1))
    fig = engine_figures(parse(text, 0.0))
    assert (fig["queued"], fig["running"]) == (6, 8) and fig["kv_usage"] == 0.95
    assert fig["ttft_ms"]["count"] == 4


def test_the_current_inter_token_latency_name() -> None:
    assert N.ITL == "sglang:inter_token_latency_seconds"  # not the old time_per_output_token


def test_window_rules_read_the_whole_window_and_gauge_rules_persistence() -> None:
    # short intervals may see no transfer or no first token at all: a level is judged on its whole window
    empty = _sample(_fig(running=1, rps=1.0), _fig(running=2, rps=1.0))
    whole = _sample(_fig(running=1, rps=1.0, xfer=800.0, xfers=9), _fig(running=2, rps=1.0, ttft=1000.0))
    assert judge([empty] * 6).verdict == "none"
    v = judge([empty] * 6, share=0.5, whole=whole)
    assert (v.verdict, v.role) == ("transfer-bound", "prefill")
    # a refusal is an event: one refresh that saw it is evidence; a queue is a level: it must persist
    refused = _sample(_fig(running=1, rps=1.0), _fig(running=2, rps=1.0), {"refused": 3, "running": 2})
    assert judge([HEALTHY_PD, refused, HEALTHY_PD]).verdict == "queue-bound"
    healthy_whole = judge([HEALTHY_PD] * 3, whole=HEALTHY_PD)
    assert healthy_whole.verdict == "none" and "KV transfer p50 4 ms" in healthy_whole.evidence[1]
