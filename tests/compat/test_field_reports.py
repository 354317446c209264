"""The field reports of issue 36's second round as check-compat rules: each says no on the reported shape and
releases, and yes on the nearest correct topology (the fixed release, either feature alone)."""

from __future__ import annotations

import pytest

from pdctl.sglang import incidents, messages
from tests.compat.test_incidents import fires, passes

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
