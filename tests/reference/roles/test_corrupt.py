"""The decode-side KV corruption TEST HOOK: armed only with both keys, and each corruption damages exactly
the received KV it names (on a real KVCache: the memory decode attends to)."""

from __future__ import annotations

import pytest
import torch

from pdctl.reference.args import parse_args
from pdctl.reference.checkpoint import DEFAULT_CONFIG
from pdctl.reference.config import ModelConfig
from pdctl.reference.kvcache import KVCache
from pdctl.reference.roles.base import KVHandle, RankPages
from pdctl.reference.roles.corrupt import ENV, FLAG, KVCorruptor, parse_spec

PAGE = 4
CFG = ModelConfig.from_dict(dict(DEFAULT_CONFIG))


def test_spec_syntax() -> None:
    spec = parse_spec("zero-layer,from=256,after=3,layer=2")
    assert (spec.kind, spec.start, spec.after, spec.layer) == ("zero-layer", 256, 3, 2)
    assert parse_spec("fp8").describe() == "fp8" and parse_spec("").kind == "none"
    for bad in ("melt", "fp8,from=-1", "fp8,since=3", "fp8,from"):
        with pytest.raises(ValueError):
            parse_spec(bad)


def test_the_hook_needs_both_keys_and_a_decode_role(monkeypatch, capsys) -> None:
    monkeypatch.delenv(ENV, raising=False)
    with pytest.raises(SystemExit) as exc:
        parse_args(["--model-path", "m", "--role", "decode", FLAG, "fp8"])
    assert exc.value.code == 2 and f"needs {ENV}=1" in capsys.readouterr().err
    monkeypatch.setenv(ENV, "1")
    with pytest.raises(SystemExit):
        parse_args(["--model-path", "m", "--role", "prefill", FLAG, "fp8"])
    assert "decode-side test hook" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args(["--model-path", "m", "--role", "decode", FLAG, "melt"])
    assert parse_args(["--model-path", "m", "--role", "decode", FLAG, "fp8"]).test_hook_corrupt_kv == "fp8"
    assert parse_args(["--model-path", "m", "--role", "decode"]).test_hook_corrupt_kv is None
    from pdctl.reference.args import build_parser

    assert FLAG not in build_parser().format_help()  # hidden from --help


def _filled(hybrid: bool = True, tp: int = 1) -> tuple[KVCache, KVHandle]:
    """A KV cache whose request pages hold distinct values (as if the transfer had just written them)."""
    heads = CFG.num_key_value_heads // tp
    kv = KVCache(tp=tp, layer_is_sliding=[CFG.is_sliding(i) for i in range(CFG.num_hidden_layers)],
                 heads_on_rank=heads, head_dim=CFG.head_dim, page_size=PAGE, max_total_tokens=256, swa_tokens=256,
                 hybrid_swa=hybrid)
    prompt_len = 40  # 10 pages; window 32 -> SWA pages from logical page 2 (positions 8..39)
    full = kv.full_alloc.alloc(10)
    swa_first = (prompt_len - CFG.sliding_window) // PAGE
    swa = kv.swa_alloc.alloc(10 - swa_first) if kv.swa_alloc is not None else []
    gen = torch.Generator().manual_seed(0)
    for rank in kv.ranks:
        for pool in rank.pools():
            pool.buffer.copy_(torch.randn(pool.buffer.shape, generator=gen) + 1.0)
    handle = KVHandle(prompt_len, 0, PAGE, swa_first, [RankPages(r, list(full), list(swa)) for r in range(tp)])
    return kv, handle


def _rows(kv: KVCache, handle: KVHandle, layer: int, rank: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    rk = kv.ranks[rank]
    pool = rk.pool_for(layer)
    pages = handle.ranks[rank].swa_pages if pool is rk.swa else handle.ranks[rank].full_pages
    return pool.read(layer, torch.tensor(pages))


def _snapshot(kv, handle):
    return {(r, layer): tuple(x.clone() for x in _rows(kv, handle, layer, r))
            for r in range(len(kv.ranks)) for layer in range(CFG.num_hidden_layers)}


def _apply(spec: str, kv: KVCache, handle: KVHandle) -> None:
    corruptor = KVCorruptor(parse_spec(spec), cfg=CFG, kv=kv)
    saved = corruptor.before_transfer(handle)
    if saved is not None:  # stale-swa: what the "transfer" writes after the snapshot is lost again
        for rank in kv.ranks:
            if rank.swa is not None:
                rank.swa.buffer.add_(5.0)
    corruptor.after_transfer(handle, saved)


def test_each_corruption_damages_what_it_names_and_nothing_before_from() -> None:
    full_layer = next(i for i in range(CFG.num_hidden_layers) if not CFG.is_sliding(i))
    kv, handle = _filled()
    before = _snapshot(kv, handle)
    _apply("zero-layer", kv, handle)
    for (rank, layer), (k0, v0) in before.items():
        k, v = _rows(kv, handle, layer, rank)
        assert torch.equal(v, v0)
        assert bool((k == 0).all()) if layer == full_layer else torch.equal(k, k0)

    kv, handle = _filled()
    before = _snapshot(kv, handle)
    _apply("swap-heads,from=20", kv, handle)
    k, _ = _rows(kv, handle, full_layer)
    k0, _ = before[(0, full_layer)]
    assert torch.equal(k[:20], k0[:20])  # positions below from= untouched
    assert torch.equal(k[20:40, 0], k0[20:40, 1]) and torch.equal(k[20:40, 1], k0[20:40, 0])

    kv, handle = _filled()
    before = _snapshot(kv, handle)
    _apply("page-shift", kv, handle)
    k, v = _rows(kv, handle, full_layer)
    k0, v0 = before[(0, full_layer)]
    assert bool((k[:PAGE] == 0).all()) and torch.equal(k[PAGE:40], k0[: 40 - PAGE])

    kv, handle = _filled()
    before = _snapshot(kv, handle)
    _apply("fp8", kv, handle)
    k, _ = _rows(kv, handle, full_layer)
    k0, _ = before[(0, full_layer)]
    assert not torch.equal(k, k0) and torch.allclose(k, k0, rtol=0.07, atol=2e-3)
    assert torch.equal(k, k.to(torch.float8_e4m3fn).to(torch.float32))


def test_stale_swa_keeps_what_the_window_pages_held_before_the_transfer() -> None:
    kv, handle = _filled()
    sliding = next(i for i in range(CFG.num_hidden_layers) if CFG.is_sliding(i))
    full_layer = next(i for i in range(CFG.num_hidden_layers) if not CFG.is_sliding(i))
    before = _snapshot(kv, handle)
    _apply("stale-swa", kv, handle)
    k, _ = _rows(kv, handle, sliding)
    assert torch.equal(k, before[(0, sliding)][0])  # the "transfer" (+5) did not stick on the window's pages
    assert torch.equal(_rows(kv, handle, full_layer)[0], before[(0, full_layer)][0])


def test_after_k_requests_and_a_run_time_switch() -> None:
    kv, handle = _filled()
    corruptor = KVCorruptor(parse_spec("zero-layer,after=2"), cfg=CFG, kv=kv)
    full_layer = next(i for i in range(CFG.num_hidden_layers) if not CFG.is_sliding(i))
    for _ in range(2):
        corruptor.after_transfer(handle, None)
    assert not bool((_rows(kv, handle, full_layer)[0] == 0).all()) and corruptor.state()["corrupted"] == 0
    corruptor.after_transfer(handle, None)
    assert bool((_rows(kv, handle, full_layer)[0] == 0).all())
    assert corruptor.state() == {"spec": "zero-layer,after=2", "received": 3, "corrupted": 1}
    corruptor.set(parse_spec("none"))
    assert corruptor.state() == {"spec": "none", "received": 0, "corrupted": 0}
    with pytest.raises(ValueError, match="layers"):
        corruptor.set(parse_spec(f"zero-layer,layer={CFG.num_hidden_layers}"))
