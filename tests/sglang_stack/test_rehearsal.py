"""How two sides' answers become one outcome (pure: rehearsal.merge) and the side description's dtypes."""

from __future__ import annotations

import pytest

from pdctl.sglang_stack.rehearsal import merge
from pdctl.sglang_stack.spec import SideSpec, torch_dtype_name

OK_PRE = {"ok": True, "transfer_s": 0.5, "descriptors": 100, "bypasses": ["x"]}
OK_DEC = {"ok": True, "mismatched_bytes": 0, "aux_ok": True, "bytes": 10**6, "transfer_s": 0.6}


def test_verified_only_when_both_succeed_and_every_byte_and_the_aux_row_landed():
    out = merge(OK_PRE, OK_DEC)
    assert out["verified"] and out["stage"] is None and out["seconds"] == 0.5 and out["descriptors"] == 100
    assert out["bypasses"] == ["x"]
    wrong = merge(OK_PRE, {**OK_DEC, "mismatched_bytes": 7})
    assert not wrong["verified"] and wrong["stage"] == "silent corruption" and "7 bytes" in wrong["error"]
    no_aux = merge(OK_PRE, {**OK_DEC, "aux_ok": False})
    assert not no_aux["verified"] and no_aux["stage"] == "silent corruption" and "aux" in no_aux["error"]


def test_the_earliest_stage_wins_and_an_exception_beats_a_timeout():
    pre = {"ok": False, "stage": "first transfer", "error": "rank(s) [0] waited: no answer before the timeout"}
    dec = {"ok": False, "stage": "handshake", "error": "RuntimeError: Page size mismatch"}
    out = merge(pre, dec)
    assert out["stage"] == "handshake" and out["error"] == "decode: RuntimeError: Page size mismatch"
    pre = {"ok": False, "stage": "registration", "error": "SGLang's bootstrap thread died: AssertionError"}
    dec = {"ok": False, "stage": "registration", "error": "rank 2 ...: no answer before the timeout"}
    assert merge(pre, dec)["error"].startswith("prefill: SGLang's bootstrap thread died")
    aborted = {"ok": False, "stage": None, "error": "aborted: the other side failed", "aborted": True}
    assert merge(aborted, dec)["stage"] == "registration"


@pytest.mark.parametrize(("dtype", "engine", "want"), [
    ("auto", "sglang", "bfloat16"), ("auto", "reference", "float32"), ("fp8_e4m3", "sglang", "float8_e4m3fn"),
    ("fp8_e5m2", "sglang", "float8_e5m2"), ("bf16", "sglang", "bfloat16")])
def test_pool_dtypes(dtype, engine, want):
    assert torch_dtype_name(dtype, engine) == want


def test_unknown_kv_dtype_is_refused_and_specs_round_trip():
    with pytest.raises(ValueError, match="nvfp4"):
        torch_dtype_name("nvfp4", "sglang")
    spec = SideSpec(role="decode", backend="nixl", tp=2, page_size=16, tokens=10, full_layers=[0], swa_layers=[],
                    window=None, kv_heads=8, head_dim=64, dtype="bfloat16")
    assert SideSpec.from_dict({**spec.to_dict(), "unknown": 1}) == spec
    assert spec.head_bytes == 128


def test_a_wrong_mamba_state_is_silent_corruption_and_says_so():
    out = merge(OK_PRE, {**OK_DEC, "mismatched_bytes": 9, "state_mismatched_bytes": 9, "state_bytes": 512})
    assert not out["verified"] and out["stage"] == "silent corruption"
    assert "(9 of them in the mamba state)" in out["error"]
    assert out["state_bytes"] == 512 and out["state_mismatched_bytes"] == 9
    good = merge(OK_PRE, {**OK_DEC, "state_bytes": 512, "state_mismatched_bytes": 0})
    assert good["verified"] and good["state_bytes"] == 512
