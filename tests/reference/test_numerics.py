"""--numerics: exact is invariant to batch, TP and chunking; gpu-like is not (like bf16 GPU kernels), but is
reproducible bit for bit and stores its KV as bf16."""

from __future__ import annotations

import torch

from pdctl.reference.numerics import GpuLikeNumerics, _split_sum, bf16
from tests.support.inprocess import EDGE_PROMPTS


def _answers(reqs):
    return [(r.output_ids, r.output_logprobs, r.input_logprobs) for r in reqs]


def _alone(eng, prompts, n=12):
    return [eng.generate([p], max_new_tokens=n)[0] for p in prompts]


def test_gpu_like_is_reproducible_and_depends_on_batch_tp_and_chunks(engine_factory):
    gpu = engine_factory("--numerics", "gpu-like")
    alone = _alone(gpu, EDGE_PROMPTS)
    assert _answers(_alone(gpu, EDGE_PROMPTS)) == _answers(alone)  # same shapes, same bits
    assert _answers(engine_factory("--numerics", "gpu-like").generate(EDGE_PROMPTS[:1], 12)) == _answers(alone[:1])
    batched = gpu.generate(EDGE_PROMPTS, max_new_tokens=12)
    assert _answers(batched) != _answers(alone)  # batch-dependent reduction order
    tp2 = _alone(engine_factory("--numerics", "gpu-like", "--tp", "2"), EDGE_PROMPTS)
    assert _answers(tp2) != _answers(alone)  # TP-dependent all-reduce
    chunked = _alone(engine_factory("--numerics", "gpu-like", "--chunked-prefill-size", "32"), EDGE_PROMPTS)
    assert _answers(chunked) != _answers(alone)  # chunk boundaries are step shapes
    exact = engine_factory()
    assert _answers(_alone(exact, EDGE_PROMPTS)) != _answers(alone)
    # ... while exact stays exact under the same changes
    assert _answers(exact.generate(EDGE_PROMPTS, max_new_tokens=12)) == _answers(_alone(exact, EDGE_PROMPTS))


def test_gpu_like_stores_kv_and_weights_as_bf16(engine_factory):
    eng = engine_factory("--numerics", "gpu-like")
    eng.generate(EDGE_PROMPTS[:1], max_new_tokens=4)
    buf = eng.engine.kv.ranks[0].full.buffer
    assert torch.count_nonzero(buf) > 0 and torch.equal(bf16(buf), buf)
    q = eng.engine.model.layers[0][0].q
    assert torch.equal(bf16(q), q)


def test_split_k_order_changes_rounding_but_not_the_value():
    num = GpuLikeNumerics(seed=3)
    splits = set()
    for rows in range(1, 40):  # the split is a seeded function of the step's row count
        num.begin_step(rows)
        splits.add(num.gemm_parts)
    assert len(splits) > 2
    torch.manual_seed(0)
    x, w = bf16(torch.randn(64, 256)), bf16(torch.randn(64, 256))
    one, three = _split_sum(x, w, 1), _split_sum(x, w, 3)
    assert not torch.equal(one, three) and torch.allclose(one, three, atol=1e-4)
    out = num.linear(x, w)
    assert torch.equal(bf16(out), out)  # GEMM outputs are stored as bf16
    num.begin_step(7)
    q, k, v = torch.randn(2, 3, 16), torch.randn(2, 40, 16), torch.randn(2, 40, 16)
    pos_q, pos_k = torch.arange(37, 40), torch.arange(40)
    from pdctl.reference.model import attend

    assert torch.allclose(num.attend(q, k, v, pos_q, pos_k, 32), attend(q, k, v, pos_q, pos_k, 32), atol=2e-2)
