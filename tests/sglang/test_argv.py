"""Parsing a rendered command with a release's flag table: what SGLang's parser accepts and refuses, every
problem at once, with did-you-mean, the allowed choices, and the release that removed a flag."""

from __future__ import annotations

from pdctl.sglang.argv import parse_argv
from pdctl.sglang.settings import ServerSettings, ucx_protocol
from pdctl.sglang.table import load_table

T23 = load_table("0.5.23")


def problems(argv: list[str], version: str = "0.5.23") -> list[str]:
    return [p.message for p in parse_argv(["--model-path", "m", *argv], load_table(version)).problems]


def test_values_types_defaults_and_aliases() -> None:
    parsed = parse_argv(["--model-path", "m", "--tp", "4", "--page-size=32", "--enable-metrics",
                         "--cuda-graph-bs-decode", "1", "2", "4", "--mem-fraction-static", "0.8"], T23)
    assert not parsed.problems
    v = parsed.values
    assert (v["tp_size"], v["page_size"], v["enable_metrics"], v["mem_fraction_static"]) == (4, 32, True, 0.8)
    assert v["cuda_graph_bs_decode"] == [1, 2, 4] and v["pp_size"] == 1  # a default
    assert parsed.given["tp_size"] == "--tp"


def test_every_problem_is_listed_with_what_would_be_right() -> None:
    got = problems(["stray", "--max-runing-requests", "64", "--attention-backend", "flashinferr", "--tp-size",
                    "four", "--torchao-config", "int4wo-128"])
    assert any("--max-runing-requests" in g and "did you mean --max-running-requests?" in g for g in got)
    assert any("invalid choice: 'flashinferr'" in g and "'flashinfer'" in g and "'triton'" in g for g in got)
    assert any("--tp-size: invalid int value: 'four'" in g for g in got)
    assert any("--torchao-config was removed in SGLang 0.5.18 (last in 0.5.17)" in g for g in got)
    assert any("'stray' (a value without a flag)" in g for g in got)
    assert len(got) == 5


def test_arity_prefixes_and_required() -> None:
    assert problems(["--page-size"]) == ["argument --page-size: expected one argument"]
    assert problems(["--enable-metrics=yes"]) == ["argument --enable-metrics: ignored explicit argument 'yes'"]
    assert problems(["--disable-radix"]) == []  # a unique prefix, as argparse allows
    assert "ambiguous option: --cuda-graph-bs could match" in problems(["--cuda-graph-bs", "1"])[0]
    assert "removed in SGLang 0.5.20" in problems(["--cuda-graph-bs", "1"])[0]
    assert parse_argv(["--tp", "2"], T23).problems[-1].message == (
        "the following arguments are required: --model-path")


def test_deprecated_flags_warn_and_still_set_their_value() -> None:
    parsed = parse_argv(["--model-path", "m", "--dp-size", "4", "--enable-dp-attention"], T23)
    assert not parsed.problems and parsed.values["enable_dp_attention"] is True
    assert parsed.warnings == ("--enable-dp-attention is deprecated in SGLang 0.5.23; use --attn-dp-size <dp-size>",)
    assert problems(["--enable-dp-attention"], "0.5.21") == []


def test_settings_follow_sglangs_derivations() -> None:
    def settings(argv: list[str], env: dict | None = None, version: str = "0.5.23") -> ServerSettings:
        return ServerSettings(parse_argv(["--model-path", "m", *argv], load_table(version)), env or {})

    assert settings(["--tp-size", "8", "--attn-dp-size", "4"]).attn_tp == 2
    assert settings(["--tp-size", "8", "--dp-size", "4", "--enable-dp-attention"], version="0.5.21").attn_tp == 2
    assert settings(["--tp-size", "8", "--dp-size", "4"]).attn_tp == 8  # plain DP: attention TP stays 8
    assert settings([], {"SGLANG_USE_HND_KVCACHE": "true"}).kv_layout == "hnd"
    assert settings([], {"SGLANG_AITER_KV_CACHE_LAYOUT": "vectorized_5d"}).kv_layout == "nhd"  # ROCm only
    assert settings(["--disaggregation-transfer-backend", "mooncake_tcp"]).protocol == "tcp"
    assert settings([], {"SGLANG_DISAGG_STAGING_BUFFER": "1"}).staging
    assert ucx_protocol({"UCX_TLS": "tcp,cuda_copy,cuda_ipc,sm"}) == "tcp"
    assert ucx_protocol({"UCX_TLS": "rc,cuda_copy"}) == "rdma" and ucx_protocol({}) == "rdma"
