"""Field-incident rules: each fires on the reported shape and release, and passes its control (the fixed
release, the setting that avoids it). The configs under configs/invalid/ are in test_rules.py."""

from __future__ import annotations

from typing import Any

import pytest

from pdctl.compat import RULES, evaluate
from pdctl.compat.capacity import estimate
from pdctl.compat.effective import effective
from pdctl.models import resolve_model_spec
from pdctl.models.spec import ModelSpec
from pdctl.render.deployment import render
from pdctl.sglang import incidents, messages
from pdctl.topology import build_topology
from tests.support.topo_factory import gpu, make

INCIDENT_RULES = {"kv-capacity", "kv-capacity-context", "dp-attention-corruption", "dp-routing",
                  "mixed-gpu-generations", "mixed-gpu-page-size", "disagg-timeouts", "nixl-ib-device",
                  "decode-radix-offload", "decode-hicache-l3", "dsv4-decode-retraction",
                  "spec-decode-only-dp-attention"}


def verdict(topo: Any, spec: Any, rule: str) -> tuple[bool, str]:
    f = next(f for f in evaluate(render(topo), spec) if f.rule == rule)
    return f.ok, f.message


def fires(rule: str, **over: Any) -> str:
    ok, message = verdict(*make(**over), rule)
    assert not ok, message
    return message


def passes(rule: str, **over: Any) -> str:
    ok, message = verdict(*make(**over), rule)
    assert ok, message
    return message


def test_incident_rules_carry_their_report():
    assert {r.id for r in RULES if r.incident} == INCIDENT_RULES
    for rule in RULES:
        if rule.incident:
            assert rule.incident.startswith("https://github.com/"), rule.id


# --- 1. DP attention that corrupts gpt-oss (sglang#37187) and DeepSeek-V4 (sglang#31699) -------------------
DPA = {"nodes": gpu("gb300", 4, 4), "server": {"args": {"ep-size": 4}},
       "prefill": {"tp": 4, "dp": 4, "enable_dp_attention": True},
       "decode": {"tp": 4, "dp": 4, "enable_dp_attention": True}}


@pytest.mark.parametrize("version,bad", [("0.5.10", False), ("0.5.11", True), ("0.5.16", True), ("0.5.18", True),
                                         ("0.5.19", True), ("0.5.20", False), ("0.5.23", False)])
def test_gpt_oss_dp_attention_is_gated_on_the_affected_releases(version, bad):
    over = {**DPA, "engine": {"version": version}}
    if bad:
        message = fires("dp-attention-corruption", **over)
        assert "reduced twice" in message and incidents.GPT_OSS_DP_ATTENTION.report in message
        assert "prefill" in message and "decode" in message
    else:
        passes("dp-attention-corruption", **over)


def test_gpt_oss_dp_attention_needs_the_reduce_scatterv_shape():
    # EP not equal to the attention DP size: the combine stays all-reduce + dp_scatter (no double reduce)
    passes("dp-attention-corruption", **{**DPA, "engine": {"version": "0.5.18"}, "server": {"args": {"ep-size": 1}}})
    # an a2a backend (DeepEP...) takes another path
    passes("dp-attention-corruption", **{**DPA, "engine": {"version": "0.5.18"},
                                         "server": {"args": {"ep-size": 4, "moe-a2a-backend": "deepep"}}})
    # 0.5.19 also requires tp == attention DP: attention TP 2 (tp 4, dp 2) no longer takes the fast path
    shape = {"nodes": gpu("gb300", 4, 4), "server": {"args": {"ep-size": 2}},
             "prefill": {"tp": 4, "dp": 2, "enable_dp_attention": True},
             "decode": {"tp": 4, "dp": 2, "enable_dp_attention": True}}
    fires("dp-attention-corruption", engine={"version": "0.5.18"}, **shape)
    passes("dp-attention-corruption", engine={"version": "0.5.19"}, **shape)


def test_other_known_models_are_not_in_the_class():
    for preset in ("llama-3.1-8b", "deepseek-v3"):  # dense; deepseek_v2.py guarded in every affected release
        passes("dp-attention-corruption", model={"path": "x", "preset": preset}, **{**DPA, "engine": {"version": "0.5.18"},
                                                                                 "nodes": gpu("b200", 8, 8)})


def test_deepseek_v4_replicated_gather_before_0_5_18():
    spec = ModelSpec(name="deepseek-v4", num_layers=4, num_attention_heads=64, num_kv_heads=1, head_dim=576,
                     layer_types=["full"] * 4, sliding_window=None, mla=True, kv_lora_rank=512, qk_rope_head_dim=64,
                     model_type="deepseek_v4")
    over = {"nodes": gpu("gb300", 8, 8), "prefill": {"tp": 8, "dp": 4, "enable_dp_attention": True},
            "decode": {"tp": 8, "dp": 4, "enable_dp_attention": True}}
    for version, bad in (("0.5.11", False), ("0.5.12", True), ("0.5.17", True), ("0.5.18", False)):
        topo, _ = make(engine={"version": version}, **over)
        ok, message = verdict(topo, spec, "dp-attention-corruption")
        assert ok is not bad, (version, message)
        if bad:
            assert "attention TP 2" in message and incidents.DEEPSEEK_V4_DP_ATTENTION.report in message
    topo, _ = make(engine={"version": "0.5.17"}, **{**over, "prefill": {"tp": 8, "dp": 8, "enable_dp_attention": True},
                                                   "decode": {"tp": 8, "dp": 8, "enable_dp_attention": True}})
    assert verdict(topo, spec, "dp-attention-corruption")[0]  # attention TP 1: nothing replicated to sum


# --- 2. KV capacity: weights with no room, a pool below the context --------------------------------------
def test_gpt_oss_120b_memory_is_counted_by_storage():
    spec = resolve_model_spec({"preset": "gpt-oss-120b"})
    assert spec.weights is not None and 116e9 < spec.weights.params < 118e9
    assert 60 < spec.weights.total_bytes / 2**30 < 62  # MXFP4 experts + bf16 rest (~65 GB checkpoint)
    topo, _ = make()
    eff = effective(render(topo))
    pre, dec = (estimate(topo, spec, eff.roles[r]) for r in ("prefill", "decode"))
    assert pre.weights_gib == pytest.approx(60.7, abs=0.1) and dec.weights_gib == pytest.approx(15.2, abs=0.1)
    assert dec.swa_tokens == int(dec.tokens * 0.8) // 64 * 64 and dec.tokens % 64 == 0
    assert dec.tokens > 4 * pre.tokens  # a quarter of the weights and of the KV heads per rank


def test_no_room_for_kv_fails_and_more_gpus_pass():
    over = {"model": {"path": "x", "preset": "deepseek-v3"}, "transfer": {"backend": "mooncake"}}
    message = fires("kv-capacity", nodes=gpu("h100", 8, 8), prefill={"tp": 8}, decode={"tp": 8}, **over)
    assert messages.kv_no_room(0.812, 1.0082).split(" Raise")[0] in message
    passes("kv-capacity", nodes=gpu("h200", 8, 8), prefill={"tp": 8}, decode={"tp": 8}, **over)
    # before 0.5.14 SGLang's words were "Not enough memory"
    old = fires("kv-capacity", engine={"version": "0.5.13"}, nodes=gpu("h100", 8, 8), prefill={"tp": 8},
                decode={"tp": 8}, **over)
    assert messages.NOT_ENOUGH_MEMORY in old


def test_mem_fraction_static_decides_and_is_read_from_the_command():
    llama = {"model": {"path": "x", "preset": "llama-3.1-8b"}, "nodes": gpu("h100", 1, 1),
             "prefill": {"tp": 1}, "decode": {"tp": 1}}
    fires("kv-capacity", server={"mem_fraction_static": 0.15}, **llama)  # 12 GiB static < 15 GiB of weights
    message = fires("kv-capacity-context", server={"mem_fraction_static": 0.3}, **llama)
    assert "fewer than --context-length 131072" in message and incidents.ABORTED_PREFILL_GARBAGE.report in message
    assert "starts without this warning" not in message  # 0.5.23 prints it at startup
    older = fires("kv-capacity-context", engine={"version": "0.5.22"}, server={"mem_fraction_static": 0.3}, **llama)
    assert "SGLang 0.5.22 starts without this warning" in older  # the same shortfall, said as silent there
    passes("kv-capacity-context", server={"mem_fraction_static": 0.8}, **llama)
    passes("kv-capacity-context", server={"mem_fraction_static": 0.3, "context_length": 32768}, **llama)
    # args: override of the same flag is what SGLang runs (and args-override says so)
    topo, spec = make(server={"args": {"mem-fraction-static": 0.3}}, **llama)
    assert not verdict(topo, spec, "kv-capacity-context")[0]


def test_reference_engine_pool_is_its_max_total_tokens():
    base = {"name": "ref", "engine": {"kind": "reference"}, "model": {"path": "/nonexistent", "preset": "reference-tiny"},
            "nodes": [{"name": "local", "host": "127.0.0.1", "gpu": "cpu", "gpus": 4}],
            "transfer": {"backend": "nixl", "protocol": "tcp"}, "server": {"page_size": 16},
            "prefill": {"nodes": ["local"], "tp": 1, "port": 31000},
            "decode": {"nodes": ["local"], "tp": 1, "port": 31100}}
    topo = build_topology(base, source="<test>")
    spec = resolve_model_spec(topo.model, engine_kind="reference")
    assert verdict(topo, spec, "kv-capacity-context")[0]
    assert estimate(topo, spec, effective(render(topo)).roles["decode"]).tokens == 8192
    small = build_topology({**base, "decode": {**base["decode"], "max_total_tokens": 1000}}, source="<test>")
    assert estimate(small, spec, effective(render(small)).roles["decode"]).tokens == 992  # page-aligned like SGLang
    ok, message = verdict(small, spec, "kv-capacity-context")
    assert not ok and "decode: KV pool holds 992 tokens, fewer than --context-length 4096" in message


# --- 3. mixed GPU generations -------------------------------------------------------------------------
MIXED = [{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 4},
         {"name": "d0", "host": "10.0.0.12", "gpu": "gb300", "gpus": 4}]


def test_mixed_generations_warn_and_name_the_soak_test():
    message = fires("mixed-gpu-generations", nodes=MIXED)
    assert "parity --soak" in message and incidents.MIXED_GPU_DRIFT.report in message
    passes("mixed-gpu-generations", nodes=gpu("h100", 4, 4))
    passes("mixed-gpu-generations", nodes=[{**MIXED[0], "gpu": "h200"}, {**MIXED[1], "gpu": "h100"}])


def test_trtllm_page_rewrite_breaks_the_handshake_only_across_generations():
    message = fires("mixed-gpu-page-size", nodes=MIXED, server={"page_size": 8})
    assert messages.page_size_mismatch(8, 64) in message
    passes("mixed-gpu-page-size", nodes=MIXED)  # page 64: trtllm_mha keeps it
    passes("mixed-gpu-page-size", nodes=gpu("gb300", 4, 4), server={"page_size": 8})  # both sides rewrite
    passes("mixed-gpu-page-size", nodes=MIXED, server={"page_size": 8, "attention_backend": "flashinfer"})
    assert "128" not in fires("mixed-gpu-page-size", engine={"version": "0.5.16"}, nodes=MIXED,
                              server={"page_size": 128}).split("changing")[0].split("page_size of")[1]
    passes("mixed-gpu-page-size", nodes=MIXED, server={"page_size": 128})  # 0.5.17+ takes 128
    tree = {"args": {"speculative-algorithm": "EAGLE", "speculative-num-steps": 3, "speculative-eagle-topk": 4,
                     "speculative-num-draft-tokens": 8}}  # SGLang's default for a tree draft is flashinfer
    llama = {"path": "meta-llama/Llama-3.1-8B-Instruct", "preset": "llama-3.1-8b"}
    passes("mixed-gpu-page-size", model=llama, nodes=MIXED, server={"page_size": 8}, prefill=tree, decode=tree)
    fires("mixed-gpu-page-size", model=llama, nodes=MIXED, server={"page_size": 8})
    passes("mixed-gpu-page-size", model={"path": "x", "preset": "deepseek-v3"}, nodes=[
        {**MIXED[0], "gpu": "h200", "gpus": 8}, {**MIXED[1], "gpus": 8}], prefill={"tp": 8}, decode={"tp": 8},
        server={"page_size": 8}, transfer={"backend": "mooncake"})  # MLA: flashinfer on Blackwell, no rewrite


# --- 4. timeouts that turn failures into hangs -------------------------------------------------------
def test_timeouts_warn_when_huge_non_positive_or_unparsable():
    env = lambda **e: {"engine": {"env": e}}
    assert "31.7 years" in fires("disagg-timeouts", **env(SGLANG_DISAGGREGATION_WAITING_TIMEOUT="1000000000"))
    assert "is not a valid integer value" in fires("disagg-timeouts", **env(SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT="1e9"))
    assert "at once" in fires("disagg-timeouts", **env(SGLANG_DISAGGREGATION_WAITING_TIMEOUT="0"))
    assert "dead prefill" in fires("disagg-timeouts", **env(SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL="600",
                                                             SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE="100"))
    passes("disagg-timeouts")
    passes("disagg-timeouts", **env(SGLANG_DISAGGREGATION_WAITING_TIMEOUT="600",
                                    SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT="900"))


def test_unparsable_timeouts_as_each_release_treats_them():
    """EnvInt/EnvFloat warn from 0.5.8; before, get_int_env_var used the default without a word and the
    heartbeat interval's float() stopped the server (read off the wheels, pdctl.sglang.facts)."""
    old = {"engine": {"version": "0.5.5.post2", "env": {"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "1e9"}}}
    said = fires("disagg-timeouts", **old)
    assert "without a word" in said and "SGLang 0.5.5.post2" in said and "not a valid integer" not in said
    crash = {"engine": {"version": "0.5.7", "env": {"SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": "5s"}}}
    assert "stops at startup (ValueError" in fires("disagg-timeouts", **crash)
    new = {"engine": {"version": "0.5.8", "env": {"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": "1e9"}}}
    assert "is not a valid integer value" in fires("disagg-timeouts", **new)


# --- 6. DP routing ------------------------------------------------------------------------------------
LLAMA8 = {"model": {"path": "x", "preset": "llama-3.1-8b"},
          "nodes": [{"name": "h0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8}],
          "prefill": {"nodes": ["h0"], "tp": 1, "port": 30000}, "decode": {"nodes": ["h0"], "tp": 2, "port": 30100}}


def test_plain_dp_on_prefill_fails_from_0_5_11():
    over = {**LLAMA8, "prefill": {**LLAMA8["prefill"], "dp": 2}}
    assert "follow_bootstrap_room conflict" in fires("dp-routing", **over)
    passes("dp-routing", engine={"version": "0.5.10"}, **over)
    passes("dp-routing", **{**LLAMA8, "prefill": {**LLAMA8["prefill"], "replicas": 2}})
    passes("dp-routing", **{**LLAMA8, "prefill": {**LLAMA8["prefill"], "tp": 2, "dp": 2, "enable_dp_attention": True}})


def test_router_dp_aware_in_pd_mode_fails():
    dpa = {**LLAMA8, "prefill": {**LLAMA8["prefill"], "tp": 2, "dp": 2, "enable_dp_attention": True}}
    assert "http://host:port@rank" in fires("dp-routing", router={"args": {"dp-aware": True}}, **dpa)
    passes("dp-routing", router={"args": {"dp-aware": False}}, **dpa)
    fires("dp-routing", router={"args": {"dp-aware": True}}, **LLAMA8)  # no DP at all: `@0` workers, still broken


def test_decode_rank_lookup_needs_0_5_10_for_other_prefill_balancing():
    dpa = {**LLAMA8, "prefill": {**LLAMA8["prefill"], "tp": 2, "dp": 2, "enable_dp_attention": True,
                                 "args": {"load-balance-method": "round_robin"}}}
    assert "bootstrap_room % 2" in fires("dp-routing", engine={"version": "0.5.9"}, **dpa)
    passes("dp-routing", engine={"version": "0.5.10"}, **dpa)
    assert "from the bootstrap server" in passes("dp-routing", **dpa)


def test_a_swa_pool_below_one_window_fails_like_sglang():
    # gpt-oss-120b TP1 on H100 with a tiny pool: the full pool holds tokens, the SWA pool not one window
    message = fires("kv-capacity", nodes=gpu("h100", 1, 4), decode={"tp": 4},
                    server={"args": {"swa-full-tokens-ratio": 0.001}})
    assert "SWA pool (" in message and "sliding_window_size (128) + page_size (64)" in message
