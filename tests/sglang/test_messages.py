"""One source for SGLang's rule texts: check-compat, the reference engine's handshake and the plan's block
builders say exactly the sentences of pdctl/sglang/messages.py (tests/sglang/test_differential.py holds
those against SGLang's own exceptions)."""

from __future__ import annotations

import pytest

from pdctl.compat import evaluate
from pdctl.plan import HeadSliceError, head_slice_blocks
from pdctl.reference.roles.handshake import handshake_problem
from pdctl.sglang import messages
from tests.support.topo_factory import rendered

INFO = {"role": "prefill", "tp_size": 1, "pp_size": 1, "page_size": 64, "kv_cache_dtype": "auto",
        "kv_layout": "nhd", "hybrid_swa": True, "num_kv_heads": 8, "head_dim": 64, "num_layers": 36,
        "swa_layers": 18, "backend": "nixl"}


def compat_message(**over) -> dict[str, str]:
    return {f.rule: f.message for f in evaluate(*rendered(**over)) if not f.ok}


@pytest.mark.parametrize("over,rule,info,text", [
    ({"decode": {"page_size": 32}}, "page-size-match", {"page_size": 32}, messages.page_size_mismatch(64, 32)),
    ({"decode": {"kv_cache_dtype": "bf16"}}, "kv-dtype-match", {"kv_cache_dtype": "bf16"},
     messages.kv_dtype_mismatch("auto", "bf16")),
    ({"decode": {"pp": 2}, "nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": "gb300", "gpus": 4},
                                     {"name": "d0", "host": "10.0.0.12", "gpu": "gb300", "gpus": 8}],
      "transfer": {"backend": "mooncake"}}, "pp-pairing", {"pp_size": 2}, messages.pp_mismatch(2, 1)),
])
def test_compat_and_reference_handshake_say_the_same(over, rule, info, text) -> None:
    assert compat_message(**over)[rule].startswith(text)
    decode = {**INFO, "role": "decode", "tp_size": 4, **info}
    assert handshake_problem(INFO, decode) == text


def test_head_slice_refusals_are_sglangs_words_everywhere() -> None:
    assert compat_message(prefill={"pp": 2})["hetero-tp-swa-pp"].startswith(messages.SWA_HETERO_TP_PP)
    assert compat_message(server={"kv_layout": "hnd"})["hetero-tp-swa-layout"].startswith(
        messages.head_slice_layout("hnd"))
    assert handshake_problem(INFO, {**INFO, "tp_size": 4, "kv_layout": "hnd"}) == messages.head_slice_layout("hnd")
    assert handshake_problem({**INFO, "pp_size": 2}, {**INFO, "tp_size": 4}) == messages.SWA_HETERO_TP_PP
    args = {"src_ptrs": [0, 1 << 30], "src_item_lens": [1024] * 2, "dst_ptrs": [0, 1 << 30],
            "dst_item_lens": [256] * 2, "src_pages": [0], "dst_pages": [0], "page_size": 4, "src_tp": 1,
            "src_rank": 0, "dst_tp": 4, "dst_rank": 0, "total_kv_heads": 4}
    for extra, text in (({"pp": 2}, messages.SWA_HETERO_TP_PP), ({"layout": "hnd"}, messages.head_slice_layout("hnd"))):
        with pytest.raises(HeadSliceError) as err:
            head_slice_blocks(**args, **extra)
        assert str(err.value) == text
