"""check-compat's prediction for a rehearsal, and agreement with the live outcome (pure logic, real findings)."""

from __future__ import annotations

import pytest

from pdctl.compat import evaluate
from pdctl.render.deployment import render
from pdctl.sglang_stack.verdict import BYPASSED_RULES, REHEARSED_RULES, agrees, first_stage, predict
from tests.support.topo_factory import make


def _predict(**over):
    topo, spec = make(**over)
    return predict(evaluate(render(topo), spec))


def test_a_compatible_topology_predicts_a_transfer():
    p = _predict()
    assert p.compat_ok and p.ok and p.stage is None and p.rules == [] and p.not_rehearsed == []
    assert agrees(p, verified=True, stage=None)
    assert not agrees(p, verified=False, stage="first transfer")  # SGLang failing where compat passed: no


def test_a_rehearsed_rule_predicts_its_stage():
    p = _predict(decode={"page_size": 32})
    assert not p.compat_ok and not p.ok and p.stage == "handshake"
    assert [r["rule"] for r in p.rules] == ["page-size-match"]
    assert agrees(p, verified=False, stage="handshake")
    assert not agrees(p, verified=False, stage="first transfer")  # the wrong stage is a disagreement
    assert not agrees(p, verified=True, stage=None)  # transferring what compat rejects is one too


def test_the_earliest_failing_stage_is_the_prediction():
    # HND on P1 -> D4 gpt-oss: kv-layout-pd (model load) comes before hetero-tp-swa-layout (first transfer)
    p = _predict(server={"kv_layout": "hnd"})
    assert {r["rule"] for r in p.rules} == {"kv-layout-pd", "hetero-tp-swa-layout"}
    assert p.stage == "model load"


def test_rules_a_rehearsal_cannot_run_are_listed_not_predicted():
    # placement (too few GPUs) is about the cluster: the transfer rehearsal cannot confirm or refute it
    p = _predict(decode={"tp": 8})
    assert not p.compat_ok and p.ok and p.stage is None
    assert "placement" in {r["rule"] for r in p.not_rehearsed}
    assert agrees(p, verified=True, stage=None)


def test_rehearsed_rules_exist_in_the_rule_table():
    from pdctl.compat import RULES_BY_ID

    assert set(REHEARSED_RULES) <= set(RULES_BY_ID)
    assert set(BYPASSED_RULES) <= set(RULES_BY_ID)


def test_a_cpu_rehearsal_steps_around_the_host_memory_guard_and_says_so():
    # engine sglang on a CPU node, NIXL TP2 -> TP1: check-compat refuses the launch (SGLang's servers would hit
    # the host-memory guard); the transfer rehearsal relabels it, so it is listed as bypassed, not a refusal
    topo, spec = make(nodes=[{"name": "local", "host": "127.0.0.1", "gpu": "cpu", "gpus": 3}],
                      prefill={"tp": 2, "nodes": ["local"]}, decode={"tp": 1, "nodes": ["local"]})
    findings = evaluate(render(topo), spec)
    assert "nixl-hetero-tp-host-memory" in {f.rule for f in findings if f.is_error}
    p = predict(findings)
    assert [r["rule"] for r in p.bypassed] == ["nixl-hetero-tp-host-memory"]
    assert "nixl-hetero-tp-host-memory" not in {r["rule"] for r in p.rules + p.not_rehearsed}
    assert p.to_dict()["bypassed_rules"] == p.bypassed


def test_first_stage_orders_by_sglang_stage():
    assert first_stage("first transfer", None, "handshake") == "handshake"
    assert first_stage(None, None) is None


@pytest.mark.parametrize(("version", "backend", "stage"), [
    ("0.5.8", "mooncake", "first transfer"),  # before sglang PR #16056
    ("0.5.10", "nixl", "first transfer"),  # before sglang PR #22240
    ("0.5.9", "mooncake", None),
    ("0.5.11", "nixl", None),
    ("0.5.23", "nixl", None),
    ("0.5.23", "mooncake", None),
])
def test_mamba_state_over_unequal_tp_is_predicted_per_release(version, backend, stage):
    # what a rehearsal of a hybrid linear-attention model's state over TP2 -> TP1 is held to: a release whose
    # backend refuses it is a predicted failure (bench-transfer refuses to call it OK), one that slices it a transfer
    p = _predict(model={"path": "Qwen/Qwen3-Next-80B-A3B-Instruct", "preset": None},
                 engine={"kind": "sglang", "version": version}, transfer={"backend": backend},
                 prefill={"tp": 2}, decode={"tp": 1})
    assert p.stage == stage and p.ok == (stage is None)
    if stage:
        assert "mamba-hetero-tp" in {r["rule"] for r in p.rules}
        assert not agrees(p, verified=True, stage=None)
