"""The field reports of issue 36's second round as check-compat rules: each says no on the reported shape and
releases, and yes on the nearest correct topology (the fixed release, either feature alone)."""

from __future__ import annotations

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


# --- decode radix cache + decode KV offload (sglang#27666) --------------------------------------------------
@pytest.mark.parametrize("version,bad", [("0.5.11", True), ("0.5.14", True), ("0.5.20", True), ("0.5.21", False),
                                         ("0.5.23", False)])
def test_decode_radix_cache_with_offload_fails_until_0_5_21(version, bad):
    over = {**LLAMA, "engine": {"version": version}, "decode": {"tp": 2, "radix_cache": True, "args": OFFLOAD}}
    if bad:
        message = fires("decode-radix-offload", **over)
        assert messages.MEMORY_LEAK in message and incidents.DECODE_RADIX_OFFLOAD.report in message
        assert message.startswith("decode:") and "fixed in SGLang 0.5.21" in message
    else:
        passes("decode-radix-offload", **over)


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
    over = {**LLAMA, "engine": {"version": version}, "decode": {"tp": 2, "radix_cache": True, "args": HICACHE_L3}}
    if bad:
        message = fires("decode-hicache-l3", **over)
        assert messages.HICACHE_LOAD_BACK_FAILED in message and incidents.DECODE_HICACHE_L3.report in message
    else:
        passes("decode-hicache-l3", **over)


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
    over = {**DSV4, "engine": {"version": version}}
    if bad:
        message = fires("dsv4-decode-retraction", **over)
        assert "NotImplementedError" in message and incidents.DSV4_DECODE_RETRACTION.report in message
    else:
        passes("dsv4-decode-retraction", **over)


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
