"""check-compat judges the commands that will run: the issue's examples, each of which used to pass all rules
and render a command SGLang rejects or mis-runs, now fail with the rule, the stage and the fix."""

from __future__ import annotations

import pytest

from pdctl.compat import compat_report, evaluate
from pdctl.compat.effective import effective
from pdctl.render.deployment import render
from tests.support.topo_factory import gpu, make, rendered


def failed(topo, spec) -> dict[str, str]:
    return {f.rule: f.message for f in evaluate(render(topo), spec) if f.is_error}


def test_args_duplicating_topology_keys_are_refused_and_misspellings_named() -> None:
    topo, spec = make(server={"args": {"tp-size": 8, "--page-size": 32, "max-runing-requests": 64,
                                       "disaggregation-mode": None}}, prefill={"tp": 2}, decode={"tp": 1})
    got = failed(topo, spec)
    assert set(got) == {"args-override", "flags-parse"}
    assert "args tp-size: 8 (prefill/decode) overrides the --tp-size pdctl renders from tp: set tp instead" \
        in got["args-override"]
    assert "--page-size pdctl renders from page_size" in got["args-override"]
    assert "args disaggregation-mode: None (prefill/decode) removes the --disaggregation-mode" in got["args-override"]
    assert "did you mean --max-running-requests?" in got["flags-parse"]
    # what the commands would run: TP 8, page 32, no disaggregation mode (judged as such)
    roles = effective(render(topo)).roles
    assert (roles["prefill"].tp, roles["prefill"].page_size) == (8, 32)
    assert roles["prefill"].values["disaggregation_mode"] == "null"


def test_aliases_and_prefixes_of_topology_flags_are_caught_too() -> None:
    got = failed(*make(decode={"args": {"tensor-parallel-size": 2}}))
    assert "args tensor-parallel-size: 2 (decode) overrides the --tp-size" in got["args-override"]


def test_a_folded_in_arg_is_judged() -> None:
    # kv-cache-dtype via args on decode only is a duplicate; speculative decoding on prefill only is judged
    got = failed(*make(prefill={"args": {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "d"}}))
    assert set(got) == {"speculative-prefill-only"}


def test_bad_choice_names_the_allowed_values() -> None:
    got = failed(*make(server={"attention_backend": "flashinferr"}))
    assert set(got) == {"flags-parse"}
    assert "invalid choice: 'flashinferr'" in got["flags-parse"] and "'flashinfer'" in got["flags-parse"]


def test_a_flag_removed_by_the_pinned_release_says_which_release() -> None:
    got = failed(*make(server={"args": {"torchao-config": "int4wo-128"}}))
    assert "--torchao-config was removed in SGLang 0.5.18" in got["flags-parse"]
    old = failed(*make(engine={"version": "0.5.17"}, server={"args": {"torchao-config": "int4wo-128"}},
                       decode={"tp": 1}))  # (equal TP: 0.5.17 predates head-sliced SWA)
    assert old == {}


def test_kv_layout_from_engine_env_is_what_is_judged() -> None:
    topo, spec = make(engine={"env": {"SGLANG_USE_HND_KVCACHE": "1"}})
    got = failed(topo, spec)
    assert set(got) == {"kv-layout-platform", "hetero-tp-swa-layout"}
    assert "SGLANG_USE_HND_KVCACHE in engine.env" in got["kv-layout-platform"]


@pytest.mark.parametrize("version,backend,bad", [("0.5.16", "nixl", True), ("0.5.17", "nixl", False),
                                                 ("0.5.15", "mooncake", True), ("0.5.16", "mooncake", False)])
def test_decode_tp_over_kv_heads_fails_by_version(version: str, backend: str, bad: bool) -> None:
    topo, spec = make(engine={"version": version}, transfer={"backend": backend}, nodes=gpu("gb300", 4, 16),
                      decode={"tp": 16}, server={"hybrid_swa_memory": False})  # 8 KV heads < decode TP 16
    assert ("gqa-replication-version" in failed(topo, spec)) is bad


def test_cross_role_settings_must_agree() -> None:
    got = failed(*make(decode={"args": {"quantization": "fp8"}}))
    assert set(got) == {"roles-agree"} and "--quantization: prefill None, decode 'fp8'" in got["roles-agree"]
    got = failed(*make(prefill={"context_length": 131072}, decode={"context_length": 32768}))
    assert set(got) == {"context-length-match"}
    ok = failed(*make(server={"args": {"quantization": "fp8"}, "context_length": 32768}))
    assert ok == {}


def test_decode_only_speculative_decoding_by_version() -> None:
    spec_args = {"args": {"speculative-algorithm": "EAGLE3", "speculative-draft-model-path": "d"}}
    assert failed(*make(decode=spec_args)) == {}  # supported since 0.5.8
    old = failed(*make(decode={**spec_args, "tp": 1}, engine={"version": "0.5.7"}))
    assert set(old) == {"speculative-decode-only-version"}


def test_report_names_the_version_and_every_stage() -> None:
    report = compat_report(*rendered(engine={"version": None}))
    assert report["sglang"]["source"] == "assumed" and report["sglang"]["note"]
    assert all(f["stage"] for f in report["findings"])
    report = compat_report(*rendered(engine={"version": "0.5.19"}))
    assert report["sglang"] == {"engine": "sglang", "asked": "0.5.19", "version": "0.5.19", "table": "0.5.19",
                                "source": "engine.version", "note": None}


def test_reference_engine_commands_are_parsed_by_its_own_parser() -> None:
    import yaml

    from pdctl.models import resolve_model_spec
    from pdctl.topology import load_topology_text
    from tests.support.paths import REPO

    doc = yaml.safe_load((REPO / "configs" / "local-cpu.yaml").read_text())
    doc["prefill"]["args"] = {"kv-cache-dtype": "no-such-dtype"}  # the engine would exit at startup
    topo = load_topology_text(yaml.safe_dump(doc))
    got = failed(topo, resolve_model_spec(topo.model, engine_kind="reference"))
    assert "the reference engine's (and, for args:, SGLang 0.5.23's) parser rejects the commands" in got["flags-parse"]
    assert "invalid choice: 'no-such-dtype'" in got["flags-parse"] and "args-override" in got
