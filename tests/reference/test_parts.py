"""The engine's parts on their own: checkpoint files, KV pool memory layout, allocator, OOM handling, CLI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from pdctl.errors import UserError
from pdctl.reference.checkpoint import DEFAULT_CONFIG, init_checkpoint, load_weights
from pdctl.reference.kvcache import KVCache, KVCacheOOM, KVPool, PageAllocator
from pdctl.reference.tokenizer import ByteTokenizer


def test_checkpoint_is_small_deterministic_and_hf_named(ref_checkpoint, tmp_path):
    again = init_checkpoint(tmp_path / "again", seed=0)
    other = init_checkpoint(tmp_path / "other", seed=1)
    data = (ref_checkpoint / "model.safetensors").read_bytes()
    assert len(data) < 20 * 1024 * 1024
    assert (again / "model.safetensors").read_bytes() == data
    assert (other / "model.safetensors").read_bytes() != data
    cfg = json.loads((ref_checkpoint / "config.json").read_text())
    for key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                "num_key_value_heads", "head_dim", "sliding_window", "layer_types", "vocab_size",
                "max_position_embeddings", "rope_theta", "rms_norm_eps", "bos_token_id", "eos_token_id"):
        assert cfg[key] == DEFAULT_CONFIG[key]
    assert cfg["model_type"] == "pdctl-reference"
    assert cfg["layer_types"] == ["sliding_attention", "full_attention"] * 2
    _, tensors = load_weights(ref_checkpoint)
    assert "model.layers.3.self_attn.q_proj.weight" in tensors and "lm_head.weight" in tensors


def test_checkpoint_overrides_and_bad_input(tmp_path):
    six = init_checkpoint(tmp_path / "six", seed=3, num_hidden_layers=6)
    cfg = json.loads((six / "config.json").read_text())
    assert cfg["num_hidden_layers"] == 6 and len(cfg["layer_types"]) == 6
    with pytest.raises(UserError, match="unknown reference config keys"):
        init_checkpoint(tmp_path / "bad", hidden_sizes=3)
    with pytest.raises(UserError, match="multiple of num_key_value_heads"):
        init_checkpoint(tmp_path / "bad2", num_key_value_heads=5)
    with pytest.raises(UserError, match="no config.json"):
        load_weights(tmp_path / "missing")


def test_tokenizer_round_trip():
    tok = ByteTokenizer()
    ids = tok.encode("héllo")
    assert ids[0] == 256 and ids[1:] == list("héllo".encode())
    assert tok.decode(ids + [257]) == "héllo"
    assert tok.token_text(257) == "</s>"


def test_pool_pointers_are_sglang_shaped():
    pool = KVPool("full", [1, 3], num_pages=5, page_size=16, heads=4, head_dim=16)
    ptrs, lens = pool.kv_ptrs(), pool.item_lens()
    item = 16 * 4 * 16 * 4
    assert lens == [item] * 4 and pool.item_len == item
    base = pool.buffer.data_ptr()
    region = 5 * item
    assert ptrs == [base, base + region, base + 2 * region, base + 3 * region]  # K of each layer, then V
    # token t of page p, head h lives at ptr + p*item_len + (t*heads + h)*head_bytes (NHD)
    k = torch.arange(4 * 16, dtype=torch.float32).view(1, 4, 16)
    pool.write(3, torch.tensor([2]), torch.tensor([5]), k, k + 1000)
    flat = pool.buffer.view(-1)
    head_elems = 16
    off = (region * 1 + 2 * item) // 4 + (5 * 4 + 1) * head_elems  # layer 3 = second K region, head 1
    assert torch.equal(flat[off : off + 16], k[0, 1])
    off_v = (region * 3 + 2 * item) // 4 + (5 * 4 + 1) * head_elems
    assert torch.equal(flat[off_v : off_v + 16], k[0, 1] + 1000)


@pytest.mark.parametrize("layout", ["hnd", "vectorized_5d"])
def test_layouts_round_trip_and_differ_from_nhd(layout):
    pools = {name: KVPool("full", [0], 3, 4, 2, 8, layout=name) for name in ("nhd", layout)}
    k = torch.randn(4, 2, 8)
    for pool in pools.values():
        pool.write(0, torch.tensor([1] * 4), torch.arange(4), k, k)
        back, _ = pool.read(0, torch.tensor([1]))
        assert torch.equal(back, k)
    assert not torch.equal(pools["nhd"].buffer, pools[layout].buffer)


def test_allocator_refcounts_and_clear_oom():
    alloc = PageAllocator(4, "full", 16)
    pages = alloc.alloc(3)
    assert 0 not in pages and alloc.free_pages == 0
    with pytest.raises(KVCacheOOM, match=r"need 1 pages of 16 tokens, 0 of 3 free"):
        alloc.alloc(1)
    alloc.incref(pages[:1])
    alloc.release(pages)
    assert alloc.free_pages == 2
    alloc.release(pages[:1])
    assert alloc.free_pages == 3
    with pytest.raises(RuntimeError, match="double free"):
        alloc.release(pages[:1])


def test_kv_cache_splits_pools_per_rank():
    kv = KVCache(tp=2, layer_is_sliding=[True, False, True, False], heads_on_rank=4, head_dim=16, page_size=16,
                 max_total_tokens=64, swa_tokens=32, hybrid_swa=True)
    assert kv.ranks[0].full.layer_ids == [1, 3] and kv.ranks[0].swa.layer_ids == [0, 2]
    assert kv.full_alloc.usable_pages == 4 and kv.swa_alloc.usable_pages == 2
    assert kv.ranks[0].full.buffer.data_ptr() != kv.ranks[1].full.buffer.data_ptr()


def test_kv_pool_is_whole_pages_rounded_down_like_sglang():
    """SGLang's max_total_num_tokens // page_size * page_size: 1000 tokens of 16-token pages hold 992."""
    kv = KVCache(tp=1, layer_is_sliding=[True, False], heads_on_rank=2, head_dim=16, page_size=16,
                 max_total_tokens=1000, swa_tokens=None, hybrid_swa=True)
    assert kv.full_alloc.usable_pages * 16 == 992 and kv.swa_alloc is not None and kv.swa_alloc.usable_pages == 62


def test_oom_request_gets_error_and_engine_keeps_serving(ref_checkpoint):
    """A request that does not fit the KV pool gets a clear error over HTTP; the next one is served."""
    from fastapi.testclient import TestClient

    from pdctl.reference.args import parse_args
    from pdctl.reference.engine import build_engine
    from pdctl.reference.http.app import create_app

    engine = build_engine(parse_args(["--model-path", str(ref_checkpoint), "--max-total-tokens", "64"]))
    with TestClient(create_app(engine)) as client:
        r = client.post("/generate", json={"text": "x" * 100, "sampling_params": {"max_new_tokens": 4}})
        assert r.status_code == 503
        assert "KV cache out of memory" in r.json()["error"]["message"]
        r = client.post("/generate", json={"text": "short", "sampling_params": {"max_new_tokens": 70,
                                                                               "temperature": 0}})
        # grew past 64 tokens with nothing left to retract: SGLang's abort of the last request (HTTP 500)
        assert r.status_code == 500 and "Out of memory even after retracting" in r.json()["error"]["message"]
        r = client.post("/generate", json={"text": "short", "sampling_params": {"max_new_tokens": 8}})
        assert r.status_code == 200 and r.json()["meta_info"]["completion_tokens"] == 8


def test_cli_init_checkpoint(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pdctl", "reference", "init-checkpoint", str(tmp_path / "c"),
                          "--seed", "2", "--json", "-"], capture_output=True, text=True, timeout=120, check=False)
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["seed"] == 2 and doc["config"]["num_hidden_layers"] == 4
    assert (tmp_path / "c" / "model.safetensors").exists()
