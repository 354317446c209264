"""check-compat on `mode: colocated` topologies: only single-server rules run, PD-only ones are listed n/a."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pdctl.compat import RULES, compat_report, evaluate, is_compatible
from pdctl.compat.findings import NOT_APPLICABLE
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology import load_topology
from tests.compat.test_cli import pdctl
from tests.support.topo_factory import make_colocated

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "configs" / "local-cpu-reference.yaml"
# SGLang 0.5.23 rules about one server (model load, kernels, GPUs, ports); everything else needs a PD pair.
# unified-memory-pp is PD-only: kv_cache_hook.handle_unified_memory_pool asserts pp == 1 only when
# disaggregation_mode != "null".
COLOCATED_RULES = {"heads-divisible", "mxfp8-gpu", "attention-backend-gpu", "placement", "bootstrap-port",
                   "flags-parse", "flags-deprecated", "reference-ignores-args", "args-override", "kv-layout-platform",
                   "dsa-page-size",  # SGLang's argument resolution sets a DSA model's page size, PD or not
                   # field incidents about one server: its KV pool at model load, DP attention's MoE combine
                   "kv-capacity", "dp-attention-corruption",
                   # start-up refusals of one server's resolution (pdctl/compat/hooks.py): not about the PD pair
                   "hicache-radix", "eplb-ep-size", "hisparse-model", "pp-speculative",
                   # ... and those on the attention backend it resolves, the DSA KV dtype, mamba's strategy
                   "attention-backend-args", "speculative-backend", "dsa-kv-dtype", "mamba-no-buffer"}


def errors(topo, spec) -> set[str]:
    return {f.rule for f in evaluate(render(topo), spec) if f.is_error}


def test_rule_table_marks_the_single_server_rules():
    assert {r.id for r in RULES if r.colocated} == COLOCATED_RULES


def test_reference_config_passes_and_lists_every_rule(monkeypatch):
    monkeypatch.chdir(ROOT)
    topo = load_topology(REFERENCE)
    findings = evaluate(render(topo), resolve_model_spec(topo.model, engine_kind=topo.engine.kind))
    assert [f.rule for f in findings] == [r.id for r in RULES]
    assert all(f.ok and f.fix is None for f in findings) and is_compatible(findings)
    for f in findings:
        if f.rule in COLOCATED_RULES:
            assert f.message != NOT_APPLICABLE and "prefill" not in f.message and "decode" not in f.message
        else:
            assert f.message == NOT_APPLICABLE
    by_rule = {f.rule: f.message for f in findings}
    assert by_rule["placement"] == "colocated 1 x 1 GPUs fit its nodes"
    assert by_rule["bootstrap-port"] == "HTTP and router ports are distinct on every machine"


def test_too_many_gpus_fails_placement_only():
    topo, spec = make_colocated(colocated={"replicas": 2})
    assert errors(topo, spec) == {"placement"}
    f = next(f for f in evaluate(render(topo), spec) if f.rule == "placement")
    assert f.message == "colocated: 2 replica(s) x tp 4 x pp 1 need 8 GPUs, but nodes n0 have 4"
    assert f.fix


@pytest.mark.parametrize("over,rule", [
    ({"colocated": {"tp": 3, "nodes": ["n0"]}, "nodes": [{"name": "n0", "host": "h", "gpu": "gb300", "gpus": 8}]},
     "heads-divisible"),
    ({"server": {"kv_cache_dtype": "mxfp8"}, "nodes": [{"name": "n0", "host": "h", "gpu": "h100", "gpus": 4}]},
     "mxfp8-gpu"),
    ({"colocated": {"attention_backend": "fa3"}}, "attention-backend-gpu"),
    ({"router": {"port": 30000}}, "bootstrap-port"),
])
def test_single_server_rules_fire_on_colocated(over, rule):
    topo, spec = make_colocated(**over)
    assert errors(topo, spec) == {rule}
    f = next(f for f in evaluate(render(topo), spec) if f.rule == rule)
    assert "colocated" in f.message or "router" in f.message


def test_pd_only_restrictions_do_not_apply():
    # each of these fails a PD rule in a PD topology; a colocated server has no handshake or KV transfer
    topo, spec = make_colocated(
        server={"unified_memory": True, "kv_layout": "hnd"},
        colocated={"pp": 2, "nodes": ["n0"], "tp": 2},
        transfer={"backend": "mooncake", "protocol": "tcp", "ib_device": "mlx5_0", "staging_buffer": True},
        engine={"version": "0.5.15"},  # before the GQA fix (mooncake 0.5.16), with --enable-unified-memory
    )
    findings = evaluate(render(topo), spec)
    assert is_compatible(findings), [f for f in findings if f.is_error]
    assert {f.rule for f in findings if f.message == NOT_APPLICABLE} == {r.id for r in RULES} - COLOCATED_RULES


def test_report_has_no_heads_or_transfer():
    topo, spec = make_colocated()
    doc = json.loads(json.dumps(compat_report(render(topo), spec, tokens=1024)))
    assert doc["ok"] is True and doc["mode"] == "colocated" and doc["topology"] == "gpt-oss-120b-colocated"
    assert doc["heads"] == [] and doc["transfer"] is None
    assert doc["attn_tp"] == {"colocated": {"tp": 4, "dp": 1, "enable_dp_attention": False, "pp": 1, "attn_tp": 4}}
    assert len(doc["findings"]) == len(RULES)


def test_cli_check_compat_colocated(monkeypatch, tmp_path):
    from pdctl.cli.main import cli

    monkeypatch.chdir(ROOT)
    runner = CliRunner()
    result = runner.invoke(cli, ["check-compat", str(REFERENCE), "--json", "-"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and doc["heads"] == [] and doc["transfer"] is None
    bad = tmp_path / "too-big.yaml"
    bad.write_text(REFERENCE.read_text().replace("tp: 1", "tp: 1\n  replicas: 3"))
    result = runner.invoke(cli, ["check-compat", str(bad)])
    assert result.exit_code == 1 and "placement" in result.output


def test_plan_refuses_a_colocated_topology():
    r = pdctl("plan", str(REFERENCE))
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "plan needs a PD topology" in " ".join(r.stderr.split()) and "Traceback" not in r.stderr
