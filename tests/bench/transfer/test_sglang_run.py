"""Which interpreter bench-transfer --stack sglang asks for SGLang's stack (pure: no SGLang is started)."""

from __future__ import annotations

from pdctl.bench.transfer.sglang_run import named_python
from tests.support.topo_factory import make


def test_only_a_named_engine_python_is_used():
    assert named_python(make()[0]) is None  # the bare default: look for SGLang's side environment
    assert named_python(make(engine={"python": "/opt/sglang/bin/python"})[0]) == "/opt/sglang/bin/python"


def test_a_release_that_refuses_the_mamba_state_over_unequal_tp_is_refused_before_any_rehearsal():
    """bench-transfer --stack sglang never calls a hybrid linear-attention deployment OK where check-compat says no:
    configs/invalid/mamba-hetero-tp.yaml (Qwen3.5, SGLang 0.5.8, Mooncake TP1 -> TP2, before sglang PR #16056)
    is refused with that rule before an interpreter is looked for (the side environment runs 0.5.23 only)."""
    from pdctl.bench.transfer.sglang_run import run_sglang_bench
    from pdctl.topology.loader import load_topology
    from tests.support.paths import REPO

    topo = load_topology(REPO / "configs" / "invalid" / "mamba-hetero-tp.yaml")
    doc = run_sglang_bench(topo, backend=None, tokens=64, interpreter="/nonexistent/python")
    assert doc["refused"] and not doc["ok"] and not doc["verified"] and doc["linear_layers"] > 0
    assert doc["predicted_stage"] == "first transfer"
    assert [r["rule"] for r in doc["predicted_rules"]] == ["mamba-hetero-tp"]
    assert "non-MLA hybrid models" in doc["error"]
    # the control: the same deployment on 0.5.9 (the per-rank state slice) is predicted to transfer
    ok = load_topology(REPO / "configs" / "invalid" / "mamba-hetero-tp.yaml", ["engine.version=0.5.9"])
    from pdctl.bench.transfer.prediction import prediction

    assert prediction(ok).ok
