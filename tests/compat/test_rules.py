"""Every rule has a passing and a failing case; the acceptance examples of issue 2 behave as specified."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.compat import RULES, RULES_BY_ID, compat_report, evaluate, is_compatible
from pdctl.compat.context import parse_version
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology import load_topology
from tests.support.topo_factory import gpu, make

ROOT = Path(__file__).resolve().parents[2]
INVALID = ROOT / "configs" / "invalid"
# Rules whose failing config cannot avoid failing a second rule too (documented in the config's comment).
ALSO_FAILS = {"hetero-tp-swa-buffers": {"unified-memory-tp"}, "hetero-tp-swa-layout": {"kv-layout-pd"}}


def failed(topo, spec) -> set[str]:
    return {f.rule for f in evaluate(render(topo), spec) if f.is_error}


def finding(topo, spec, rule):
    return next(f for f in evaluate(render(topo), spec) if f.rule == rule)


def test_one_finding_per_rule_in_table_order():
    topo, spec = make()
    findings = evaluate(render(topo), spec)
    assert [f.rule for f in findings] == [r.id for r in RULES]
    assert all(f.ok and f.fix is None for f in findings)
    assert is_compatible(findings)
    assert len(RULES_BY_ID) == len(RULES) >= 23


def test_every_rule_has_fix_summary_known_severity_and_stage():
    from pdctl.sglang.stages import STAGES

    for rule in RULES:
        assert rule.fix and rule.summary and rule.severity in ("error", "warning", "info")
        assert rule.stage in STAGES


@pytest.mark.parametrize("rule", [r.id for r in RULES if r.severity == "error"])
def test_invalid_config_fires_exactly_its_rule(rule, monkeypatch):
    monkeypatch.chdir(ROOT)  # attn-tp-ratio's model.config is relative to the repository root
    path = INVALID / f"{rule}.yaml"
    assert path.is_file(), f"missing {path}"
    assert path.read_text().startswith("#"), "each invalid config starts with a comment"
    topo = load_topology(path)
    spec = resolve_model_spec(topo.model)
    assert failed(topo, spec) == {rule} | ALSO_FAILS.get(rule, set())
    f = finding(topo, spec, rule)
    assert f.message and f.fix == RULES_BY_ID[rule].fix


@pytest.mark.parametrize("rule", [r.id for r in RULES if r.severity == "warning" and r.incident])
def test_invalid_config_fires_its_incident_warning_and_no_error(rule, monkeypatch):
    """Field-incident warnings have a config too: it fires the warning, and nothing fails."""
    monkeypatch.chdir(ROOT)
    path = INVALID / f"{rule}.yaml"
    assert path.is_file(), f"missing {path}"
    assert path.read_text().startswith("#"), "each invalid config starts with a comment"
    topo = load_topology(path)
    spec = resolve_model_spec(topo.model)
    assert failed(topo, spec) == set()
    f = finding(topo, spec, rule)
    assert not f.ok and f.message and f.fix == RULES_BY_ID[rule].fix


# --- the acceptance examples of issue 2 ---------------------------------------------------------------

def test_p1_d4_pp2_fails_hetero_tp_swa_pp():
    topo, spec = make(prefill={"pp": 2})
    assert failed(topo, spec) == {"hetero-tp-swa-pp"}
    assert "non-MLA SWA hybrid models with pipeline parallelism yet" in finding(topo, spec, "hetero-tp-swa-pp").message
    # pp 2 on both roles (decode node big enough): same verdict
    topo, spec = make(nodes=gpu("gb300", 4, 8), prefill={"pp": 2}, decode={"pp": 2})
    assert failed(topo, spec) == {"hetero-tp-swa-pp"}


def test_p1_d4_hnd_layout_fails_hetero_tp_swa_layout():
    topo, spec = make(server={"kv_layout": "hnd"})
    # SGLang's servers refuse HND for PD at startup (kv-layout-pd), before any head slice is built
    assert failed(topo, spec) == {"hetero-tp-swa-layout", "kv-layout-pd"}
    assert "needs the NHD KV cache layout, got hnd" in finding(topo, spec, "hetero-tp-swa-layout").message
    assert "not supported with disagg yet" in finding(topo, spec, "kv-layout-pd").message
    # the reference engine carries HND pages with its own transfer: only SGLang's stack refuses them
    ref = {"kind": "reference", "version": None}
    assert failed(*make(engine=ref, server={"kv_layout": "hnd"})) == {"hetero-tp-swa-layout"}
    assert failed(*make(engine=ref, server={"kv_layout": "hnd"}, transfer={"stack": "sglang"})) == {
        "hetero-tp-swa-layout", "kv-layout-pd"}


def test_vectorized_5d_cannot_be_rendered_on_nvidia():
    # SGLANG_AITER_KV_CACHE_LAYOUT is ROCm-only: SGLang would run NHD, so the head-slice rule passes and the
    # layout rule says the topology cannot be what it claims
    topo, spec = make(server={"kv_layout": "vectorized_5d"})
    assert failed(topo, spec) == {"kv-layout-platform"}
    assert "ROCm" in finding(topo, spec, "kv-layout-platform").message


def test_p1_d4_mxfp8_fails_hetero_tp_mxfp8():
    topo, spec = make(server={"kv_cache_dtype": "mxfp8"})
    assert failed(topo, spec) == {"hetero-tp-mxfp8"}


def test_mxfp8_equal_tp_passes_on_gb300_fails_on_h100():
    topo, spec = make(server={"kv_cache_dtype": "mxfp8"}, prefill={"tp": 4})
    assert failed(topo, spec) == set()
    topo, spec = make(nodes=gpu("h100"), server={"kv_cache_dtype": "mxfp8"}, prefill={"tp": 4})
    assert failed(topo, spec) == {"mxfp8-gpu"}
    assert "requires an SM100+ (Blackwell) GPU" in finding(topo, spec, "mxfp8-gpu").message


# --- passing / not-applicable sides of the rules -----------------------------------------------------

def test_equal_tp_exempts_head_slice_rules():
    topo, spec = make(prefill={"tp": 4, "pp": 2}, decode={"tp": 4, "pp": 2}, nodes=gpu("gb300", 8, 8),
                      server={"kv_layout": "hnd"})
    assert failed(topo, spec) == {"kv-layout-pd"}  # SGLang refuses HND for PD at startup, whatever the TPs


def test_hybrid_swa_memory_off_exempts_swa_rules():
    topo, spec = make(prefill={"pp": 2}, server={"hybrid_swa_memory": False, "kv_layout": "hnd"},
                      engine={"version": "0.5.20"})
    assert failed(topo, spec) == {"kv-layout-pd"}
    assert "hybrid_swa_memory: false" in finding(topo, spec, "hetero-tp-swa-pp").message


def test_non_swa_model_exempts_swa_rules():
    topo, spec = make(model={"path": "meta-llama/Llama-3.1-8B", "preset": "llama-3.1-8b"},
                      prefill={"tp": 4, "pp": 2}, decode={"tp": 2}, nodes=gpu("h100", 8, 4))
    assert failed(topo, spec) == set()


def test_mla_unequal_tp_passes_and_staging_ok_without_mla():
    # flashinfer named: SGLang's own choice for DeepSeek V3 on Blackwell, trtllm_mla, refuses mxfp8 KV
    topo, spec = make(model={"path": "deepseek-ai/DeepSeek-V3", "preset": None}, nodes=gpu("gb300", 8, 8),
                      prefill={"tp": 8}, decode={"tp": 4},
                      server={"kv_cache_dtype": "mxfp8", "attention_backend": "flashinfer"})
    assert spec.mla and failed(topo, spec) == set()


def test_dp_attention_sets_attn_tp():
    # tp 4 with dp 4 attention on decode: attention TP 1 == prefill's 1, so whole pages and mxfp8 is fine
    topo, spec = make(decode={"tp": 4, "dp": 4, "enable_dp_attention": True}, server={"kv_cache_dtype": "mxfp8"})
    assert topo.decode.attn_tp == 1 and failed(topo, spec) == set()
    report = compat_report(render(topo), spec, 1024)
    assert report["attn_tp"]["decode"]["attn_tp"] == 1 and report["transfer"]["path"] == "page"


def test_hetero_tp_swa_version_rules():
    for version, bad in [("0.5.4", True), ("0.5.8", True), ("0.5.16", True), ("0.5.21", True), ("0.5.22rc1", True),
                         ("0.5.22", False), ("0.5.23", False), ("0.5.23.post1", False), ("0.6.0", False)]:
        topo, spec = make(engine={"version": version})
        assert (failed(topo, spec) == {"hetero-tp-swa-version"}) is bad, version
    # SGLang's words as each release says them: no state name before 0.5.9, no refusal at all before 0.5.4
    said = {v: finding(*make(engine={"version": v}), "hetero-tp-swa-version").message for v in ("0.5.8", "0.5.9", "0.5.3")}
    assert "for non-MLA hybrid models yet." in said["0.5.8"] and "SGLang 0.5.8" in said["0.5.8"]
    assert "for non-MLA SWA hybrid models yet." in said["0.5.9"]
    assert "NOT support" not in said["0.5.3"] and "not even the refusal, which arrived in 0.5.4" in said["0.5.3"]
    topo, spec = make(engine={"version": None})
    assert failed(topo, spec) == set()
    topo, spec = make(engine={"kind": "reference", "version": "0.1"})
    assert failed(topo, spec) == set()
    assert parse_version("nonsense") is None and parse_version("0.5") == (0, 5, 0, 0, 0)


def test_staging_swa_scope_is_info_and_does_not_fail():
    topo, spec = make(transfer={"staging_buffer": True})
    f = finding(topo, spec, "staging-swa-scope")
    assert not f.ok and f.severity == "info" and f.fix
    assert is_compatible(evaluate(render(topo), spec))
    topo, spec = make(transfer={"staging_buffer": True}, prefill={"tp": 4})
    assert finding(topo, spec, "staging-swa-scope").ok


def test_hybrid_swa_memory_match_is_an_error_at_the_first_transfer():
    # SGLang's stack fails the first transfer with this mismatch (tests/sglang_stack: the live matrix)
    topo, spec = make(decode={"hybrid_swa_memory": False})
    f = finding(topo, spec, "hybrid-swa-memory-match")
    assert not f.ok and f.severity == "error" and f.stage == "first transfer"
    assert "State index length mismatch" in f.message
    assert not is_compatible(evaluate(render(topo), spec))
    assert finding(*make(server={"hybrid_swa_memory": False}), "hybrid-swa-memory-match").ok
    llama = make(model={"path": "meta-llama/Llama-3.1-8B", "preset": "llama-3.1-8b"}, nodes=gpu("h100"),
                 decode={"hybrid_swa_memory": False})
    assert finding(*llama, "hybrid-swa-memory-match").ok


def test_staging_chunk_default_and_negative():
    topo, spec = make(transfer={"staging_buffer": True}, server={"page_size": 48})
    assert failed(topo, spec) == {"staging-chunk"}  # 8192 % 48 != 0
    topo, spec = make(transfer={"staging_buffer": True}, server={"chunked_prefill_size": -1})
    assert "got -1" in finding(topo, spec, "staging-chunk").message
    topo, spec = make(transfer={"staging_buffer": True}, server={"chunked_prefill_size": 4096})
    assert failed(topo, spec) == set()


def test_staging_pp_ok_with_mooncake():
    topo, spec = make(transfer={"staging_buffer": True, "backend": "mooncake"}, nodes=gpu("gb300", 8, 8),
                      prefill={"tp": 4, "pp": 2}, decode={"tp": 4, "pp": 2})
    assert failed(topo, spec) == set()


def test_unified_memory_over_mooncake_rdma_equal_tp_passes_but_not_tcp():
    topo, spec = make(transfer={"backend": "mooncake"}, server={"unified_memory": True}, prefill={"tp": 4})
    assert failed(topo, spec) == set()
    topo, spec = make(transfer={"backend": "mooncake", "protocol": "tcp"}, server={"unified_memory": True},
                      prefill={"tp": 4})
    assert failed(topo, spec) == {"unified-memory-backend"}
    assert "got 'mooncake_tcp'" in finding(topo, spec, "unified-memory-backend").message


def test_attention_backends_by_gpu():
    assert failed(*make(nodes=gpu("h100"), server={"attention_backend": "fa3"})) == set()
    assert failed(*make(server={"attention_backend": "fa3"})) == {"attention-backend-gpu"}
    assert failed(*make(server={"attention_backend": "trtllm_mha"})) == set()
    assert failed(*make(nodes=gpu("h200"), server={"attention_backend": "trtllm_mha"})) == set()
    assert failed(*make(server={"args": {"decode-attention-backend": "fa3"}})) == {"attention-backend-gpu"}
    mla = make(model={"path": "deepseek-ai/DeepSeek-V3", "preset": None}, nodes=gpu("gb300", 8, 8),
               prefill={"tp": 8}, decode={"tp": 8}, server={"attention_backend": "trtllm_mha"})
    assert failed(*mla) == {"attention-backend-gpu"}


def test_heads_divisible_replication_and_mla():
    # decode TP 16 > 8 KV heads: replicated heads are fine (64 attention heads still divide)
    topo, spec = make(nodes=gpu("gb300", 4, 16), decode={"tp": 16})
    assert failed(topo, spec) == set()
    topo, spec = make(nodes=gpu("gb300", 4, 16), decode={"tp": 12}, transfer={"backend": "mooncake"})
    assert failed(topo, spec) == {"heads-divisible"}


def test_mooncake_tcp_without_ib_device_passes():
    assert failed(*make(transfer={"backend": "mooncake", "protocol": "tcp"})) == set()


def test_same_host_roles_placement_and_ports():
    nodes = [{"name": "n0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8}]
    topo, spec = make(nodes=nodes, prefill={"nodes": ["n0"], "tp": 4}, decode={"nodes": ["n0"], "tp": 4})
    assert failed(topo, spec) == set()
    topo, spec = make(nodes=nodes, prefill={"nodes": ["n0"], "tp": 4}, decode={"nodes": ["n0"], "tp": 8})
    assert "placement" in failed(topo, spec)
    topo, spec = make(nodes=nodes, prefill={"nodes": ["n0"], "tp": 4}, decode={"nodes": ["n0"], "tp": 4,
                                                                             "port": 30000})
    assert failed(topo, spec) == {"bootstrap-port"}


def test_report_shape():
    topo, spec = make()
    report = compat_report(render(topo), spec, 8192)
    assert {"ok", "topology", "model", "findings", "heads", "attn_tp", "transfer"} <= set(report)
    assert report["ok"] is True and report["topology"] == "gpt-oss-120b-p1-d4"
    assert len(report["heads"]) == 4 and report["transfer"]["path"] == "head-slice"
    assert set(report["findings"][0]) == {"rule", "severity", "ok", "message", "fix", "stage"}


def test_docs_describe_every_rule():
    text = (ROOT / "docs" / "check-compat.md").read_text()
    for rule in RULES:
        assert f"### {rule.id} ({rule.severity}; stage: {rule.stage}" in text, rule.id


def test_attn_tp_ratio_names_where_sglang_fails_for_the_shape():
    """Measured on SGLang's own stack (tests/sglang_stack): a decode rank mapped to a prefill rank that
    does not exist fails its registration; a prefill rank nobody pairs waits out the first transfer."""
    six = {"model": {"path": "made-up/six", "config": str(INVALID / "attn-tp-ratio.config.json")},
           "transfer": {"backend": "mooncake"}, "nodes": gpu("h100", 8, 8)}
    up = finding(*make(**six, prefill={"tp": 2}, decode={"tp": 3}), "attn-tp-ratio")
    down = finding(*make(**six, prefill={"tp": 3}, decode={"tp": 2}), "attn-tp-ratio")
    assert not up.ok and up.stage == "registration" and RULES_BY_ID["attn-tp-ratio"].stage == "registration"
    assert not down.ok and down.stage == "first transfer"
