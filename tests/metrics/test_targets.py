"""Which endpoints a run's metrics come from: workers' /metrics and the router's Prometheus port (recorded,
or read from its argv in plan.json)."""

from __future__ import annotations

from pdctl.metrics.targets import router_target, worker_targets

RECORDS = [
    {"name": "prefill-0", "role": "prefill", "url": "http://10.0.0.1:30000"},
    {"name": "decode-0", "role": "decode", "url": "http://10.0.0.2:30100/"},
    {"name": "decode-0-n1", "role": "decode", "url": None},  # node rank 1 serves no HTTP
]


def test_workers_that_serve_http_are_scraped_at_metrics() -> None:
    targets = worker_targets(RECORDS)
    assert [(t.name, t.kind, t.url) for t in targets] == [
        ("prefill-0", "engine", "http://10.0.0.1:30000/metrics"),
        ("decode-0", "engine", "http://10.0.0.2:30100/metrics"),
    ]


def test_router_metrics_url_recorded_by_launch_wins() -> None:
    state = {"processes": RECORDS, "router": {"metrics_url": "http://10.0.0.9:29100/metrics"}}
    plan = {"router": {"argv": ["python", "-m", "sglang_router.launch_router", "--prometheus-port", "1"]}}
    target = router_target(state, plan)
    assert target.url == "http://10.0.0.9:29100/metrics"
    assert target.workers == ("http://10.0.0.2:30100/",)  # in flight: counted on decode workers only


def test_router_metrics_url_from_its_argv() -> None:
    argv = ["python", "-m", "sglang_router.launch_router", "--host", "0.0.0.0", "--prometheus-port", "29123"]
    state = {"processes": RECORDS, "router": {"advertise": "10.0.0.9", "host": "login1"}}
    assert router_target(state, {"router": {"argv": argv}}).url == "http://10.0.0.9:29123/metrics"
    bound = [*argv, "--prometheus-host", "fd00::5"]
    assert router_target(state, {"router": {"argv": bound}}).url == "http://[fd00::5]:29123/metrics"
    missing = router_target(state, {"router": {"argv": argv[:-2]}})
    assert missing.url is None and "--prometheus-port" in (missing.why or "")
    assert router_target(state, None).url is None


def test_colocated_router_counts_every_worker() -> None:
    colocated = [{"name": "colocated-0", "role": "colocated", "url": "http://h:1"},
                 {"name": "colocated-1", "role": "colocated", "url": "http://h:2"}]
    target = router_target({"processes": colocated, "router": {"metrics_url": "http://h:9/metrics"}}, None)
    assert target.workers == ("http://h:1", "http://h:2")
