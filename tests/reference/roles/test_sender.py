"""Pure logic of the transfer: page pairing, aux slots, handshake verdicts (SGLang's wording), block building."""

from __future__ import annotations

import numpy as np
import pytest

from pdctl.plan import head_slice_params, heads_on_rank, prefill_peers
from pdctl.reference.roles.handshake import handshake_problem
from pdctl.reference.roles.sender import (
    AUX_SLOT_BYTES,
    aux_cached_tokens,
    decode_aux,
    encode_aux,
    full_page_pairs,
    rank_blocks,
    swa_page_pairs,
)


def info(**over):
    base = {
        "role": "x",
        "tp_size": 2,
        "pp_size": 1,
        "page_size": 16,
        "kv_cache_dtype": "auto",
        "kv_layout": "nhd",
        "hybrid_swa": True,
        "num_kv_heads": 8,
        "head_dim": 16,
        "num_layers": 4,
        "swa_layers": 2,
        "backend": "nixl",
        "skip_checks": False,
    }
    return base | over


def test_full_pages_skip_what_decode_already_holds():
    assert full_page_pairs([5, 6, 7, 8], [1, 2, 3, 4], 0, 16) == ([5, 6, 7, 8], [1, 2, 3, 4])
    assert full_page_pairs([5, 6, 7, 8], [1, 2, 3, 4], 32, 16) == ([7, 8], [3, 4])


def test_swa_pages_pair_by_logical_index():
    # prefill holds logical pages 3..5, decode 4..5 (its radix cache covered more): pair 4 and 5 only
    assert swa_page_pairs(3, [30, 40, 50], 4, [9, 10]) == ([40, 50], [9, 10])
    assert swa_page_pairs(3, [30, -1, 50], 3, [7, 8, 9]) == ([30, 50], [7, 9])


def test_aux_roundtrip_and_limits():
    blob = encode_aux(65, -0.25, [(-0.25, 65), (-3.5, 66)])
    slot = blob + bytes(AUX_SLOT_BYTES - len(blob))
    assert decode_aux(slot) == (65, -0.25, [(-0.25, 65), (-3.5, 66)])
    assert aux_cached_tokens(slot) == 0
    blob = encode_aux(65, -0.25, [], cached_tokens=48)
    assert aux_cached_tokens(blob + bytes(AUX_SLOT_BYTES - len(blob))) == 48
    with pytest.raises(ValueError):
        decode_aux(bytes(AUX_SLOT_BYTES))  # never written
    with pytest.raises(ValueError):
        encode_aux(1, 0.0, [(0.0, i) for i in range(2000)])


@pytest.mark.parametrize(
    ("pre", "dec", "message"),
    [
        (
            info(),
            info(page_size=32),
            (
                "Page size mismatch: prefill server has page_size=16, but decode server has "
                "page_size=32. Both servers must use the same --page-size value."
            ),
        ),
        (
            info(),
            info(kv_cache_dtype="fp8_e4m3"),
            (
                "KV cache dtype mismatch: prefill server has kv_cache_dtype=auto, "
                "but decode server has kv_cache_dtype=fp8_e4m3. Both servers must use the same --kv-cache-dtype value."
            ),
        ),
        (
            info(kv_cache_dtype="mxfp8"),
            info(kv_cache_dtype="mxfp8", tp_size=1),
            (
                "PD Disaggregation does NOT support different attention TP sizes with MXFP8 KV cache: prefill "
                "attn_tp_size=2, decode attn_tp_size=1, state types ['block_scale', 'block_scale_swa']."
            ),
        ),
        (
            info(pp_size=2),
            info(tp_size=1),
            (
                "PD Disaggregation does NOT support PD different TP sizes for non-MLA "
                "SWA hybrid models with pipeline parallelism yet."
            ),
        ),
        (
            info(),
            info(tp_size=1, kv_layout="vectorized_5d"),
            "Head-sliced PD transfer needs the NHD KV cache layout, got vectorized_5d",
        ),
        (info(), info(pp_size=3), "Decode pp size (3) should be equal to prefill pp size (1) or 1"),
    ],
)
def test_handshake_rejects_what_sglang_rejects(pre, dec, message):
    assert handshake_problem(pre, dec) == message
    assert handshake_problem(pre, dec | {"skip_checks": True}) is None


def test_handshake_accepts_valid_pairings_and_layouts_off_the_head_slice_path():
    assert handshake_problem(info(), info(tp_size=1)) is None
    assert handshake_problem(info(kv_layout="hnd"), info(kv_layout="hnd")) is None  # equal TP: whole pages
    assert (
        handshake_problem(info(hybrid_swa=False), info(tp_size=1, hybrid_swa=False, kv_layout="hnd")) is None
    )
    assert handshake_problem(info(kv_cache_dtype="mxfp8"), info(kv_cache_dtype="mxfp8")) is None


def test_handshake_hard_limits_hold_even_when_unsafe():
    assert "backend mismatch" in handshake_problem(info(), info(backend="mooncake", skip_checks=True))
    assert "KV shape mismatch" in handshake_problem(info(), info(num_kv_heads=4, skip_checks=True))


@pytest.mark.parametrize(("src_tp", "dst_tp"), [(2, 1), (1, 2), (1, 4), (2, 2), (4, 16)])
def test_rank_blocks_move_exactly_the_decode_ranks_heads(src_tp, dst_tp):
    """Simulate the pools as numpy arrays and apply the descriptors with memmove semantics."""
    H, hd, ps, layers, pages = 8, 4, 4, 2, 3  # 4-byte "heads"
    kv = np.random.default_rng(0).integers(1, 255, (2, layers, pages * ps, H, hd), dtype=np.uint8)

    def pool(tp, rank, fill):
        n, first = heads_on_rank(H, tp), (rank // max(1, tp // H)) * heads_on_rank(H, tp)
        arr = np.zeros((2, layers, pages + 1, ps, n, hd), dtype=np.uint8)
        if fill:
            arr[:, :, 1:] = kv[:, :, :, first : first + n].reshape(arr[:, :, 1:].shape)
        return arr, first, n

    def desc(a):  # SGLang-shaped: every layer's K, then every layer's V
        return {
            "ptrs": [a[k, layer].ctypes.data for k in (0, 1) for layer in range(layers)],
            "item_lens": [a.strides[2]] * (2 * layers),
        }

    for d in range(dst_tp):
        dst, dfirst, dn = pool(dst_tp, d, False)
        srcs = {p: pool(src_tp, p, True) for p in prefill_peers(src_tp, dst_tp, d)}
        for p, (src, _, _) in srcs.items():
            s, t, n = rank_blocks(
                src_pools={"full": desc(src)},
                dst_pools={"full": desc(dst)},
                pages={"full": ([1, 2, 3], [1, 2, 3])},
                page_size=ps,
                src_tp=src_tp,
                src_rank=p,
                dst_tp=dst_tp,
                dst_rank=d,
                kv_heads=H,
            )
            hs = head_slice_params(src_tp, dst_tp, p, d, H)
            assert len(s) == (2 * layers * 3 if src_tp == dst_tp else 2 * layers * 3 * ps)
            assert set(n.tolist()) == {(ps * hs.num_heads * hd) if src_tp == dst_tp else hs.num_heads * hd}
            sb, db = src.reshape(-1), dst.reshape(-1)
            for a, b, length in zip(s.tolist(), t.tolist(), n.tolist()):
                oa, ob = a - src.ctypes.data, b - dst.ctypes.data
                db[ob : ob + length] = sb[oa : oa + length]
        want = kv[:, :, :, dfirst : dfirst + dn].reshape(dst[:, :, 1:].shape)
        assert np.array_equal(dst[:, :, 1:], want), f"decode rank {d} of TP{src_tp}->TP{dst_tp}"
        assert not dst[:, :, 0].any()
