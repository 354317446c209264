"""The KVArgs pdctl hands SGLang for the reference engine's pools (which are not SGLang pool objects) say what
SGLang's own `setup_state_kv_args` says for an SWAKVPool of the same buffers — run in SGLang's interpreter."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.e2e  # SGLang's interpreter

SCRIPT = r"""
import json, torch
from pdctl.sglang_stack.kvargs import kv_args
from pdctl.sglang_stack.spec import SideSpec
from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool
from sglang.srt.disaggregation.utils import get_kv_transfer_buf_infos
spec = SideSpec(role="prefill", backend="mooncake", tp=2, page_size=16, tokens=64, full_layers=[1, 3],
                swa_layers=[0, 2], window=32, kv_heads=8, head_dim=64, dtype="bfloat16")
pool = SWAKVPool(size=128, size_swa=64, page_size=16, dtype=torch.bfloat16, head_num=4, head_dim=64,
                 swa_attention_layer_ids=[0, 2], full_attention_layer_ids=[1, 3], device="cpu",
                 enable_memory_saver=False)
full = get_kv_transfer_buf_infos(pool)
aux = ([1], [2], [3])
theirs = kv_args(spec, 1, full, aux, pool=pool)
ours = kv_args(spec, 1, full, aux, swa=pool.get_state_buf_infos())
keys = ["state_types", "state_data_ptrs", "state_data_lens", "state_item_lens", "state_dim_per_tensor",
        "state_slice_outer_counts", "state_layer_ids", "state_conv_shard_groups", "swa_kv_cache_layout",
        "is_hybrid_mla_backend", "kv_data_ptrs", "kv_item_lens", "kv_head_num", "total_kv_head_num", "engine_rank"]
print(json.dumps({k: [str(getattr(theirs, k)), str(getattr(ours, k))] for k in keys}))
"""


def test_engine_kvargs_match_sglangs_own_setup(sglang_stack_python):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sglang_stack_python, "-c", SCRIPT], capture_output=True, text=True, env=env, cwd=REPO,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["state_types"][0] != "[]"  # SGLang saw an SWA state component
    assert all(theirs == ours for theirs, ours in got.values()), got
