"""SGLang's memory heuristics as pdctl.sglang.memory computes them: worked examples of handle_gpu_memory_settings
(0.5.23; the pool arithmetic is held against SGLang's own code in test_incidents_differential.py)."""

from __future__ import annotations

from pdctl.sglang import memory


def test_default_mem_fraction_static_worked_examples() -> None:
    h100 = memory.GPU_MEMORY_MIB["h100"]
    prefill = memory.ServerShape("prefill", tp=1, pp=1, attn_dp=1, mla=False, chunked_prefill_size=None,
                                 max_running_requests=None)
    # 512 + 8192 x 1.5 + 1/8 GiB + 58 prefill graphs x 8 MiB = 13392 MiB reserved (> the 10 GiB floor)
    assert memory.prefill_graph_sizes(8192) == 58
    assert memory.default_mem_fraction_static(h100, prefill) == round((h100 - 13392) / h100, 3) == 0.836
    decode = memory.ServerShape("decode", tp=4, pp=1, attn_dp=1, mla=False, chunked_prefill_size=None,
                                max_running_requests=None)
    # activation max(512 graphs, 2048) x 1.5 + 512 + 512 MiB (tp 4) + 512 x 2 graph = 5120 -> the 10 GiB floor
    assert memory.default_mem_fraction_static(h100, decode) == round((h100 - 10240) / h100, 3)
    assert memory.default_chunked_prefill_size(memory.GPU_MEMORY_MIB["gb300"]) == 16384


def test_pool_sizes_are_page_aligned_and_capped() -> None:
    layout = memory.kv_layout(kv_heads=8, head_dim=64, attn_tp=1, full_layers=18, swa_layers=18, element_bytes=2)
    assert layout.full_bytes == layout.swa_bytes == 8 * 2 * 64 * 2 * 18 and layout.cell_bytes == 36864 * 1.8
    sizes = memory.pool_sizes(10 << 30, layout, 64)
    assert sizes.max_total_num_tokens % 64 == 0 and sizes.swa_tokens == int(sizes.max_total_num_tokens * 0.8) // 64 * 64
    assert memory.pool_sizes(10 << 30, layout, 64, max_total_tokens=1000).max_total_num_tokens == 960
    assert memory.pool_sizes(-1, layout, 64).max_total_num_tokens == 0
    mla = memory.kv_layout(kv_heads=128, head_dim=192, attn_tp=8, full_layers=61, swa_layers=0, element_bytes=2,
                           mla_dim=576)
    assert mla.cell_bytes == 576 * 2 * 61  # one latent per layer, independent of TP
