"""The start-up refusals the differential found (pdctl/compat/hooks.py): each fires on SGLang's refused shape and
passes on the fixed one (SGLang's own verdicts on both: tests/sglang/test_resolution.py)."""

from __future__ import annotations

from pdctl.compat import evaluate
from pdctl.sglang import messages
from tests.support.topo_factory import rendered


def verdict(rule: str, **kw):
    return next(f for f in evaluate(*rendered(**kw)) if f.rule == rule)


def test_hicache_on_decode_needs_its_radix_cache():
    bad = verdict("hicache-radix", decode={"args": {"enable-hierarchical-cache": True}})
    assert not bad.ok and messages.HICACHE_NEEDS_RADIX in bad.message and bad.message.startswith("decode")
    assert verdict("hicache-radix", decode={"radix_cache": True,
                                            "args": {"enable-hierarchical-cache": True}}).ok
    assert verdict("hicache-radix", prefill={"args": {"enable-hierarchical-cache": True}}).ok
    assert not verdict("hicache-radix", prefill={"args": {"enable-hierarchical-cache": True,
                                                          "disable-radix-cache": True}}).ok


def test_eplb_needs_expert_parallelism():
    bad = verdict("eplb-ep-size", prefill={"args": {"enable-eplb": True}})
    assert not bad.ok and messages.EPLB_NEEDS_EP in bad.message and bad.message.startswith("prefill")
    assert verdict("eplb-ep-size", prefill={"args": {"enable-eplb": True, "ep-size": 2}}).ok
    assert verdict("eplb-ep-size").ok


def test_speculative_decoding_with_decode_radix_by_release():
    def spec(version: str, algo: str, radix: bool = True):
        return verdict("speculative-decode-radix", engine={"version": version},
                       prefill={"args": {"speculative-algorithm": algo}},
                       decode={"radix_cache": radix, "args": {"speculative-algorithm": algo}})

    bad = spec("0.5.23", "NGRAM")
    assert not bad.ok and messages.spec_decode_radix("NGRAM") in bad.message
    assert spec("0.5.23", "EAGLE").ok and spec("0.5.23", "NEXTN").ok  # 0.5.23 allows the EAGLE family
    assert not spec("0.5.22", "EAGLE").ok and not spec("0.5.16", "EAGLE3").ok
    assert spec("0.5.22", "NGRAM", radix=False).ok


def test_hisparse_needs_a_sparse_attention_model():
    bad = verdict("hisparse-model", prefill={"args": {"enable-hisparse": True}})  # gpt-oss-120b
    assert not bad.ok and messages.hisparse_model(True) in bad.message
    old = verdict("hisparse-model", engine={"version": "0.5.20"}, prefill={"args": {"enable-hisparse": True}})
    assert not old.ok and messages.hisparse_model(False) in old.message
    dsa = verdict("hisparse-model", model={"preset": "deepseek-v3.2", "path": "deepseek-ai/DeepSeek-V3.2"},
                  prefill={"args": {"enable-hisparse": True}})
    assert dsa.ok
    assert verdict("hisparse-model").ok


def test_pipeline_parallelism_with_speculative_decoding_by_release():
    def pp(version: str, algo: str):
        return verdict("pp-speculative", engine={"version": version},
                       prefill={"tp": 2, "pp": 2, "args": {"speculative-algorithm": algo}},
                       decode={"args": {"speculative-algorithm": algo}})

    assert messages.PP_EAGLE_ONLY in pp("0.5.23", "EAGLE3").message and not pp("0.5.23", "EAGLE3").ok
    assert pp("0.5.23", "EAGLE").ok and pp("0.5.21", "NEXTN").ok
    assert not pp("0.5.20", "EAGLE").ok and messages.PP_NO_SPECULATIVE in pp("0.5.16", "EAGLE").message


def test_hisparse_on_decode_refuses_decode_radix():
    bad = verdict("hisparse-decode-radix", decode={"radix_cache": True, "args": {"enable-hisparse": True}})
    assert not bad.ok and messages.HISPARSE_DECODE_RADIX in bad.message
    assert verdict("hisparse-decode-radix", decode={"args": {"enable-hisparse": True}}).ok
