"""The field reports of issue 36's second round as check-compat rules: each says no on the reported shape and
releases, and yes on the nearest correct topology (the fixed release, either feature alone)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.sglang import incidents, messages
from tests.compat.test_incidents import fires, passes

ROOT = Path(__file__).resolve().parents[2]
LLAMA = {"model": {"path": "meta-llama/Llama-3.1-8B-Instruct", "preset": "llama-3.1-8b"},
         "nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 8},
                   {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8}],
         "transfer": {"backend": "mooncake"}, "prefill": {"tp": 2}}
OFFLOAD = {"disaggregation-decode-enable-offload-kvcache": True, "hicache-storage-backend": "file"}


def per_release(rule: str, version: str, bad: bool, over: dict, *said: str) -> None:
    """RULE fires on OVER at VERSION (its message holding every SAID) when BAD, else passes."""
    over = {**over, "engine": {"version": version}}
    if not bad:
        passes(rule, **over)
        return
    message = fires(rule, **over)
    for words in said:
        assert words in message, (words, message)


# --- decode radix cache + decode KV offload (sglang#27666) --------------------------------------------------
@pytest.mark.parametrize("version,bad", [("0.5.11", True), ("0.5.14", True), ("0.5.20", True), ("0.5.21", False),
                                         ("0.5.23", False)])
def test_decode_radix_cache_with_offload_fails_until_0_5_21(version, bad):
    per_release("decode-radix-offload", version, bad, {**LLAMA, "decode": {"tp": 2, "radix_cache": True, "args": OFFLOAD}},
                "decode: ", messages.MEMORY_LEAK, incidents.DECODE_RADIX_OFFLOAD.report, "fixed in SGLang 0.5.21")


def test_either_decode_feature_alone_passes():
    base = {**LLAMA, "engine": {"version": "0.5.20"}}
    passes("decode-radix-offload", **base, decode={"tp": 2, "radix_cache": True})
    passes("decode-radix-offload", **base, decode={"tp": 2, "args": OFFLOAD})
    # the reference engine has no SGLang offload manager
    passes("decode-radix-offload", **{**base, "engine": {"kind": "reference", "version": None}},
           decode={"tp": 2, "radix_cache": True, "args": OFFLOAD})


# --- decode radix cache + HiCache with an L3 store on decode (sglang#30322) ---------------------------------
HICACHE_L3 = {"enable-hierarchical-cache": True, "hicache-storage-backend": "file"}


@pytest.mark.parametrize("version,bad", [("0.5.12", False), ("0.5.13", True), ("0.5.18", True), ("0.5.22", True),
                                         ("0.5.23", False)])
def test_decode_hicache_l3_warns_on_0_5_13_to_0_5_22(version, bad):
    per_release("decode-hicache-l3", version, bad, {**LLAMA, "decode": {"tp": 2, "radix_cache": True, "args": HICACHE_L3}},
                messages.HICACHE_LOAD_BACK_FAILED, incidents.DECODE_HICACHE_L3.report)


def test_decode_hicache_without_l3_or_radix_passes():
    base = {**LLAMA, "engine": {"version": "0.5.22"}}
    passes("decode-hicache-l3", **base, decode={"tp": 2, "radix_cache": True,
                                                "args": {"enable-hierarchical-cache": True}})
    passes("decode-hicache-l3", **base, decode={"tp": 2, "args": HICACHE_L3})  # no decode radix: no decode HiCache
    # prefill's HiCache with L3 is not the decode mixin's path
    passes("decode-hicache-l3", **{**base, "prefill": {"tp": 2, "args": HICACHE_L3}},
           decode={"tp": 2, "radix_cache": True})


# --- DeepSeek-V4's KV-full retraction on decode (sglang#33385) ---------------------------------------------
DSV4 = {"model": {"path": "deepseek-ai/DeepSeek-V4", "config": "tests/models/configs/deepseek-v4-trimmed.config.json"},
        "nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": "b200", "gpus": 8},
                  {"name": "d0", "host": "10.0.0.12", "gpu": "b200", "gpus": 8}],
        "transfer": {"backend": "mooncake"}, "prefill": {"tp": 8}, "decode": {"tp": 8}}


@pytest.mark.parametrize("version,bad", [("0.5.11", False), ("0.5.12", True), ("0.5.17", True), ("0.5.18", True),
                                         ("0.5.21", True), ("0.5.22", False), ("0.5.23", False)])
def test_dsv4_decode_retraction_fails_on_0_5_12_to_0_5_21(version, bad, monkeypatch):
    monkeypatch.chdir(ROOT)  # the DeepSeek-V4 config path is relative to the repository root
    per_release("dsv4-decode-retraction", version, bad, DSV4, "NotImplementedError",
                incidents.DSV4_DECODE_RETRACTION.report)


def test_dsv4_retraction_backup_none_and_other_models_pass(monkeypatch):
    monkeypatch.chdir(ROOT)
    # 0.5.21's backup `none` aborts a retracted request instead of copying its KV
    passes("dsv4-decode-retraction", **{**DSV4, "engine": {"version": "0.5.21"},
                                        "decode": {"tp": 8, "args": {"disaggregation-decode-retraction-backup": "none"}}})
    fires("dsv4-decode-retraction", **{**DSV4, "engine": {"version": "0.5.21"},
                                       "decode": {"tp": 8, "args": {"disaggregation-decode-retraction-backup":
                                                                    "cpu_tensor"}}})
    # DeepSeek-V3.2 (DSA, another pool) and the base gpt-oss are not in the report
    passes("dsv4-decode-retraction", **{**DSV4, "engine": {"version": "0.5.21"}, "model": {
        "path": "deepseek-ai/DeepSeek-V3.2", "config": "tests/models/configs/deepseek-v3.2-trimmed.config.json"}})
    passes("dsv4-decode-retraction", engine={"version": "0.5.21"})


# --- DSA: SGLang sets the page size itself ------------------------------------------------------------------
V32 = {**DSV4, "model": {"path": "deepseek-ai/DeepSeek-V3.2", "preset": "deepseek-v3.2"},
       "nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": "h200", "gpus": 8},
                 {"name": "d0", "host": "10.0.0.12", "gpu": "h200", "gpus": 8}]}


@pytest.mark.parametrize("version,word", [("0.5.5", "NSA"), ("0.5.8", "DSA"), ("0.5.23", "DSA")])
def test_dsa_page_size_other_than_64_is_not_what_runs(version, word):
    message = fires("dsa-page-size", **{**V32, "engine": {"version": version}, "server": {"page_size": 32}})
    assert f"'Setting page size to 64 for DeepSeek {word}.'" in message and "prefill page_size 32" in message
    passes("dsa-page-size", **{**V32, "engine": {"version": version}, "server": {"page_size": 64}})


def test_dsa_page_size_follows_index_kpool_from_0_5_22(tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    cfg = json.loads((ROOT / "tests/models/configs/deepseek-v3.2-trimmed.config.json").read_text())
    path = tmp_path / "kpool.config.json"
    path.write_text(json.dumps({**cfg, "index_kpool": 2}))
    over = {**V32, "model": {"path": "example/dsa-kpool-2", "config": str(path)}, "server": {"page_size": 128}}
    passes("dsa-page-size", **{**over, "engine": {"version": "0.5.22"}})
    assert "Setting page size to 64 for" in fires("dsa-page-size", **{**over, "engine": {"version": "0.5.21"}})
    assert "to 128 for" in fires("dsa-page-size", **{**over, "engine": {"version": "0.5.23"},
                                                      "server": {"page_size": 64}})


def test_dsa_page_size_leaves_other_models_and_engines_alone(monkeypatch):
    monkeypatch.chdir(ROOT)
    passes("dsa-page-size", **{**LLAMA, "server": {"page_size": 32}})  # not DSA
    passes("dsa-page-size", **{**DSV4, "server": {"page_size": 32}})  # DeepSeek-V4: its own hook, not this override
    passes("dsa-page-size", **{**V32, "server": {"page_size": 32}, "engine": {"kind": "reference", "version": None}})


# --- EAGLE on decode only + DP attention on decode, MTP top-k sharing (sglang#32527) -----------------------
EAGLE = {"speculative-algorithm": "EAGLE", "speculative-num-steps": 3, "speculative-eagle-topk": 1,
         "speculative-num-draft-tokens": 4}
SHARE = {**V32, "model": {"path": "example/dsa-mtp-index-share",
                          "config": "configs/invalid/spec-decode-only-dp-attention.config.json"},
         "decode": {"tp": 8, "dp": 8, "enable_dp_attention": True, "args": EAGLE}}


@pytest.mark.parametrize("version,bad", [("0.5.15", False), ("0.5.16", True), ("0.5.20", True), ("0.5.23", True)])
def test_decode_only_eagle_with_dp_attention_deadlocks_from_0_5_16(version, bad, monkeypatch):
    monkeypatch.chdir(ROOT)
    per_release("spec-decode-only-dp-attention", version, bad, SHARE, "deadlocks at warm-up",
                incidents.SPEC_DECODE_ONLY_DP_ATTENTION.report)


def test_decode_only_eagle_nearest_correct_topologies_pass(monkeypatch):
    monkeypatch.chdir(ROOT)
    # the maintainers' answer: speculation on prefill too (prefill then seeds decode's top-k)
    passes("spec-decode-only-dp-attention", **{**SHARE, "prefill": {"tp": 8, "args": EAGLE}})
    # decode without DP attention: no idle rank runs another graph
    passes("spec-decode-only-dp-attention", **{**SHARE, "decode": {"tp": 8, "args": EAGLE}})
    # a topk-2 draft tree: SGLang does not share the top-k
    passes("spec-decode-only-dp-attention", **{**SHARE, "decode": {**SHARE["decode"],
                                                                   "args": {**EAGLE, "speculative-eagle-topk": 2}}})
    # DeepSeek-V3.2 without index_share_for_mtp_iteration
    passes("spec-decode-only-dp-attention", **{**SHARE, "model": V32["model"]})
