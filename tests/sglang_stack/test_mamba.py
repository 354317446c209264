"""What each rank's mamba state must hold, computed from the model alone (pure numpy: the decode side's byte check
of a hybrid linear-attention rehearsal rests on it, and it must not borrow SGLang's own slicing code)."""

from __future__ import annotations

import numpy as np

from pdctl.sglang_stack.mamba import conv_groups, conv_shard, global_state, temporal_shard

LINEAR = {"num_key_heads": 2, "num_value_heads": 4, "key_head_dim": 3, "value_head_dim": 5, "conv_kernel": 4}


def test_conv_state_is_query_key_value_each_sharded_on_its_own():
    groups = conv_groups(LINEAR)
    assert groups == [6, 6, 20]  # key heads x key dim (query, key), value heads x value dim
    channels = np.arange(sum(groups))[None, :, None]  # [layers, channels, bytes]: each channel holds its index
    rank1 = conv_shard(channels, groups, tp=2, rank=1)[0, :, 0].tolist()
    # rank 1 of 2: the second half of the query (3-5), of the key (9-11) and of the value (22-31)
    assert rank1 == [3, 4, 5, 9, 10, 11, *range(22, 32)]
    assert conv_shard(channels, groups, tp=1, rank=0)[0, :, 0].tolist() == list(range(32))
    # not one contiguous slice (what a transfer that ignored the q/k/v groups would deliver)
    assert rank1 != list(range(16, 32))


def test_temporal_state_is_sharded_by_value_heads():
    ssm = np.arange(4)[None, :, None, None] * np.ones((2, 4, 5, 12), dtype=np.int64)
    assert temporal_shard(ssm, tp=2, rank=1)[:, :, 0, 0].tolist() == [[2, 3], [2, 3]]
    assert temporal_shard(ssm, tp=1, rank=0).shape == ssm.shape


def test_global_state_is_seeded_and_sized_by_the_model():
    conv, ssm = global_state(LINEAR, layers=3, conv_elem=2, ssm_elem=4, seed=7)
    assert conv.shape == (3, 32, 3 * 2) and ssm.shape == (3, 4, 5, 3 * 4)
    again, _ = global_state(LINEAR, layers=3, conv_elem=2, ssm_elem=4, seed=7)
    other, _ = global_state(LINEAR, layers=3, conv_elem=2, ssm_elem=4, seed=8)
    assert np.array_equal(conv, again) and not np.array_equal(conv, other)
    # the shards of every rank put back together are the whole state (nothing dropped, nothing doubled)
    parts = [conv_shard(conv, conv_groups(LINEAR), 2, r) for r in range(2)]
    starts = [0, 6, 12, 32]
    for g in range(3):
        half = (starts[g + 1] - starts[g]) // 2
        offsets = [sum((starts[i + 1] - starts[i]) // 2 for i in range(g))] * 2
        rebuilt = np.concatenate([p[:, offsets[r]:offsets[r] + half] for r, p in enumerate(parts)], axis=1)
        assert np.array_equal(rebuilt, conv[:, starts[g]:starts[g + 1]])
