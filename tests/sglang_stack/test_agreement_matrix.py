"""The live agreement matrix: SGLang 0.5.23's own KV managers, senders, receivers and bootstrap server move one
request per case between two real processes, and check-compat must have said the same thing before.

Every case states what must happen ("transfer": every byte where pdctl.plan says, the aux row too; or the
stage SGLang fails at) and the test holds both SGLang's live outcome and check-compat's prediction to it — so
a rule that is wrong and a SGLang behaviour that changed both fail here. Disagreements this matrix found and
fixed: attn-tp-ratio's stage (registration, not first transfer), hybrid-swa-memory-match (an error, not a
warning), kv-layout-pd (new: SGLang refuses HND for PD at startup). docs/sglang-stack.md has the table.

Cost: one prefill and one decode driver for the whole module (SGLang's import once per process); a case is a
fresh set of managers (~0.3-3 s) and one request of ~100 tokens; a failing case is stopped as soon as either
side reports SGLang's failure. The hybrid linear-attention cases and their two fault cases: ~5 s each.
"""

from __future__ import annotations

import pytest

from pdctl.bench.transfer.prediction import prediction
from pdctl.sglang_stack.sides import side_specs
from pdctl.sglang_stack.verdict import agrees
from tests.support.sglang_stack import topology, write_models

pytestmark = pytest.mark.e2e  # SGLang's stack in two processes, real NIXL and Mooncake

OK = "transfer"
SWA_ONLY_PREFILL = {"decode": {"hybrid_swa_memory": False}}
# (id, model, prefill TP, decode TP, backend, page size, topology overrides, expected outcome)
CASES = [
    ("swa-1-2-nixl", "swa", 1, 2, "nixl", 16, {}, OK),
    ("swa-2-1-nixl", "swa", 2, 1, "nixl", 16, {}, OK),
    ("swa-1-4-nixl-p64", "swa", 1, 4, "nixl", 64, {}, OK),
    ("swa-4-1-mooncake", "swa", 4, 1, "mooncake", 16, {}, OK),
    ("swa-2-1-mooncake-p64", "swa", 2, 1, "mooncake", 64, {}, OK),
    ("swa-1-2-mooncake-p1", "swa", 1, 2, "mooncake", 1, {}, OK),
    ("mha-2-2-nixl", "mha", 2, 2, "nixl", 16, {}, OK),
    ("mha-1-2-mooncake", "mha", 1, 2, "mooncake", 16, {}, OK),
    ("mqa-1-4-mooncake", "mqa", 1, 4, "mooncake", 16, {}, OK),
    ("mqa-4-1-nixl", "mqa", 4, 1, "nixl", 16, {}, OK),
    ("gqa2-1-2-nixl-p1", "gqa2", 1, 2, "nixl", 1, {}, OK),
    ("gqa2-2-4-mooncake", "gqa2", 2, 4, "mooncake", 16, {}, OK),
    # hybrid linear attention (Qwen3-Next-like): the full layers' KV pages and the request's mamba state
    # (StateType.MAMBA: conv + SSM per linear layer), whole slot on equal TP, sliced per rank on unequal TP
    ("linear-1-1-nixl", "linear", 1, 1, "nixl", 16, {}, OK),
    ("linear-1-1-mooncake", "linear", 1, 1, "mooncake", 16, {}, OK),
    ("linear-2-1-nixl", "linear", 2, 1, "nixl", 16, {}, OK),
    ("linear-2-1-mooncake", "linear", 2, 1, "mooncake", 16, {}, OK),
    ("linear-1-2-mooncake", "linear", 1, 2, "mooncake", 16, {}, OK),
    # SGLang fails, and check-compat said so, at the same stage
    ("mqa-2-4-nixl", "mqa", 2, 4, "nixl", 16, {}, "registration"),  # nixl-tp-over-heads
    ("gqa6-2-3-nixl", "gqa6", 2, 3, "nixl", 16, {}, "registration"),  # attn-tp-ratio
    ("gqa6-2-3-mooncake", "gqa6", 2, 3, "mooncake", 16, {}, "registration"),  # attn-tp-ratio
    ("gqa6-3-2-mooncake", "gqa6", 3, 2, "mooncake", 16, {}, "first transfer"),  # attn-tp-ratio: rank 2 unpaired
    ("page-mismatch-nixl", "mha", 1, 1, "nixl", 16, {"decode": {"page_size": 32}}, "handshake"),
    ("dtype-mismatch-mooncake", "mha", 1, 1, "mooncake", 16, {"decode": {"kv_cache_dtype": "fp8_e4m3"}},
     "handshake"),
    ("hnd-mha-1-1-nixl", "mha", 1, 1, "nixl", 16, {"server": {"kv_layout": "hnd"}}, "model load"),
    ("swa-only-prefill-2-1-mooncake", "swa", 2, 1, "mooncake", 16, SWA_ONLY_PREFILL, "first transfer"),
    ("swa-only-prefill-1-1-nixl", "swa", 1, 1, "nixl", 16, SWA_ONLY_PREFILL, "first transfer"),
]
TOKENS = 100
TIMEOUT_S = 60.0
HANG_TIMEOUT_S = 15.0  # a case SGLang fails by waiting (a prefill rank nobody pairs): how long pdctl waits


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return write_models(tmp_path_factory.mktemp("rehearsal-models"))


@pytest.fixture(scope="module")
def rehearsal(sglang_stack_python):
    from pdctl.sglang_stack.rehearsal import Rehearsal

    pair = Rehearsal(sglang_stack_python, timeout=TIMEOUT_S)
    try:
        yield pair
    finally:
        pair.close()


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_sglang_stack_agrees_with_check_compat(case, models, rehearsal, record_property):
    name, model, p_tp, d_tp, backend, page_size, over, expected = case
    topo = topology(models[model], prefill_tp=p_tp, decode_tp=d_tp, backend=backend, page_size=page_size, **over)
    pre, dec = side_specs(topo, tokens=TOKENS, timeout=HANG_TIMEOUT_S if expected == "first transfer" else TIMEOUT_S)
    predicted = prediction(topo)
    outcome = rehearsal.run(pre, dec)
    live = OK if outcome["verified"] else outcome["stage"]
    said = OK if predicted.ok else predicted.stage
    record_property("sglang_stack", f"{name}: live={live} compat={said} descriptors={outcome.get('descriptors')}")
    detail = f"live: {outcome['error']}; check-compat: {predicted.rules}"
    assert live == expected, detail
    assert said == expected, detail
    assert agrees(predicted, outcome["verified"], outcome["stage"]), detail
    if expected == OK:
        assert outcome["mismatched_bytes"] == 0 and outcome["aux_ok"] and outcome["bytes"] > 0
        assert outcome["descriptors"] > 0  # SGLang handed its transfer library real descriptors
        # a linear-attention model's mamba state was part of what was checked: one request's conv + SSM state,
        # 2 linear layers x (256 channels x 3 x bf16 + 4 x 32 x 32 x fp32) on the decode side's ranks together
        assert outcome["state_bytes"] == (2 * (256 * 3 * 2 + 4 * 32 * 32 * 4) if model == "linear" else 0)
    else:
        assert outcome["error"], "a failure names SGLang's error"
    if expected != "model load":  # a CPU rehearsal over NIXL says plainly it ran SGLang's GPU path on host memory
        assert bool(outcome.get("bypasses")) == (backend == "nixl"), outcome.get("bypasses")


def test_without_the_cpu_bypass_sglang_refuses_hetero_tp_into_host_memory(models, rehearsal):
    """What the NIXL bypass stands in for, shown live: on host memory (DRAM, SGLang's HiSparse path) SGLang's
    NIXL manager refuses heterogeneous-TP writes at the decode rank's registration — a guard GPU servers
    never meet (their KV is VRAM). Equal TP over the same path transfers."""
    from dataclasses import replace

    topo = topology(models["mha"], prefill_tp=2, decode_tp=1, backend="nixl")
    pre, dec = (replace(s, bypass_guards=False) for s in side_specs(topo, tokens=TOKENS, timeout=TIMEOUT_S))
    outcome = rehearsal.run(pre, dec)
    assert not outcome["verified"] and outcome["stage"] == "registration", outcome
    assert "NIXL heterogeneous-TP direct-to-host KV transfer is not implemented safely yet" in outcome["error"]
    assert outcome["bypasses"] == []
    topo = topology(models["mha"], prefill_tp=1, decode_tp=1, backend="nixl")
    pre, dec = (replace(s, bypass_guards=False) for s in side_specs(topo, tokens=TOKENS, timeout=TIMEOUT_S))
    assert rehearsal.run(pre, dec)["verified"]


@pytest.mark.parametrize(("backend", "p_tp", "fault", "where"), [
    ("mooncake", 1, "state-bytes", "prefill"),  # one byte of the prefill's SSM state off
    ("nixl", 2, "state-slot", "decode"),  # decode hands SGLang the next mamba slot, not its request's
])
def test_a_wrong_or_misplaced_mamba_state_fails_the_byte_check(backend, p_tp, fault, where, models, rehearsal):
    """The byte check says no when the state that arrives is not the request's: SGLang reports success (its
    transfer ran), the decode side's check finds the bytes, and the outcome disagrees with check-compat's OK."""
    from dataclasses import replace

    topo = topology(models["linear"], prefill_tp=p_tp, decode_tp=1, backend=backend)
    pre, dec = side_specs(topo, tokens=TOKENS, timeout=TIMEOUT_S)
    pre, dec = (replace(pre, fault=fault), dec) if where == "prefill" else (pre, replace(dec, fault=fault))
    outcome = rehearsal.run(pre, dec)
    assert not outcome["verified"] and outcome["stage"] == "silent corruption", outcome["error"]
    assert outcome["state_mismatched_bytes"] > 0 and outcome["mismatched_bytes"] == outcome["state_mismatched_bytes"]
    assert "mamba state" in outcome["error"]
    assert not agrees(prediction(topo), outcome["verified"], outcome["stage"])  # check-compat said it transfers
