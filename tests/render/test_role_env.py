"""Per-role environment (prefill.env / decode.env / colocated.env / router.env merged over engine.env):
rendered only into that role's processes, and what check-compat's rules judge per role."""

from __future__ import annotations

from pdctl.compat import compat_report
from tests.support.topo_factory import make_colocated, rendered

ENV = {"engine": {"env": {"NCCL_DEBUG": "WARN", "SHARED": "engine"}},
       "decode": {"env": {"SGLANG_DECODE_BOOTSTRAP_TIMEOUT": "600", "SHARED": "decode"}},
       "prefill": {"env": {"ONLY_PREFILL": "1"}},
       "router": {"env": {"RUST_LOG": "info"}}}


def test_each_role_gets_engine_env_and_its_own_only() -> None:
    deployment, _ = rendered(**ENV)
    by_role = {w.role: w.env for w in deployment.workers}
    assert by_role["decode"]["SGLANG_DECODE_BOOTSTRAP_TIMEOUT"] == "600" and by_role["decode"]["SHARED"] == "decode"
    assert "SGLANG_DECODE_BOOTSTRAP_TIMEOUT" not in by_role["prefill"] and by_role["prefill"]["SHARED"] == "engine"
    assert by_role["prefill"]["ONLY_PREFILL"] == "1" and "ONLY_PREFILL" not in by_role["decode"]
    assert all(w.env["NCCL_DEBUG"] == "WARN" for w in deployment.workers)
    router = deployment.router
    assert router.env == {"NCCL_DEBUG": "WARN", "SHARED": "engine", "RUST_LOG": "info"}
    assert "RUST_LOG" not in by_role["decode"] and "RUST_LOG" not in by_role["prefill"]


def test_the_role_env_wins_over_the_transfer_path() -> None:
    deployment, _ = rendered(transfer={"backend": "nixl", "protocol": "tcp"}, decode={"env": {"UCX_TLS": "all"}})
    by_role = {w.role: w.env for w in deployment.workers}
    assert by_role["decode"]["UCX_TLS"] == "all" and by_role["prefill"]["UCX_TLS"] != "all"


def test_check_compat_judges_the_decode_only_timeout_on_decode() -> None:
    deployment, spec = rendered(decode={"env": {"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "0"}})
    report = compat_report(deployment, spec, 1024)
    failed = [f for f in report["findings"] if not f["ok"] and "WAITING_TIMEOUT" in f["message"]]
    assert failed and all("decode:" in f["message"] and "prefill:" not in f["message"] for f in failed)
    ok, _ = rendered(prefill={"env": {"SGLANG_DISAGGREGATION_WAITING_TIMEOUT": "0"}})
    assert not [f for f in compat_report(ok, spec, 1024)["findings"] if not f["ok"] and "WAITING_TIMEOUT" in f["message"]]


def test_colocated_env() -> None:
    from pdctl.render.deployment import render

    topo, _ = make_colocated(engine={"env": {"A": "1"}}, colocated={"env": {"B": "2"}})
    [worker] = render(topo).workers
    assert worker.env["A"] == "1" and worker.env["B"] == "2"
