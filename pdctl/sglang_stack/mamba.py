"""One rank's mamba state for a rehearsal of a hybrid linear-attention model (Qwen3-Next, Qwen3.5): SGLang's own
request pool with its MambaPool, a seeded state in the request's slot on the prefill side, and a byte check of
every slot on the decode side.

SGLang keeps one conv state and one temporal (SSM) state per request per linear-attention layer in a MambaPool
owned by the request pool (`HybridReqToTokenPool` on prefill, `HybridMambaDecodeReqToTokenPool` on decode, as
mem_cache/kv_cache_configurator.py builds them); the full-attention layers' KV lives in a `HybridLinearKVPool`
around that MambaPool (pools.py). Its PD transfer sends the request's slot as the state component
StateType.MAMBA (disaggregation/utils.py::setup_state_kv_args), whole slot to slot on equal attention TP, sliced
per rank on unequal TP (`_send_mamba_state_slice`). The state's shape per rank is SGLang's own
(Qwen3NextConfig.mamba2_cache_params under the published rank: Mamba2StateShape.create).

What every rank must hold is computed here from the model alone, not from SGLang's slicing code: the global state
of a layer (all heads) is seeded random bytes, conv `[conv_dim, kernel - 1]` with conv_dim = cat([query | key |
value]) and each of the three head-sharded over attention TP on its own; temporal `[value heads, value head dim,
key head dim]`, sharded by value heads. `conv_shard` / `temporal_shard` are pure (numpy) and tested in pdctl's
interpreter.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from pdctl.sglang_stack.spec import SideSpec

REQUESTS = 2  # request rows of the rehearsal's request pool (one request moves at a time)
SEED_SALT = 0x5A17  # the state's random stream is not the KV's


def conv_groups(linear: dict[str, int]) -> list[int]:
    """The full conv sub-block widths: query, key (key heads x key head dim each), value (value heads x dim)."""
    key = linear["num_key_heads"] * linear["key_head_dim"]
    return [key, key, linear["num_value_heads"] * linear["value_head_dim"]]


def global_state(linear: dict[str, int], layers: int, conv_elem: int, ssm_elem: int,
                 seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Every head's state of one request, as bytes: conv `[layers, conv_dim, (kernel-1) x conv_elem]`, temporal
    `[layers, value heads, value head dim, key head dim x ssm_elem]`; the same on both sides (seeded)."""
    rng = np.random.default_rng([seed, SEED_SALT])
    conv_dims = (layers, sum(conv_groups(linear)), (linear["conv_kernel"] - 1) * conv_elem)
    ssm_dims = (layers, linear["num_value_heads"], linear["value_head_dim"], linear["key_head_dim"] * ssm_elem)
    conv = np.frombuffer(rng.bytes(int(np.prod(conv_dims))), dtype=np.uint8).reshape(conv_dims)
    ssm = np.frombuffer(rng.bytes(int(np.prod(ssm_dims))), dtype=np.uint8).reshape(ssm_dims)
    return conv, ssm


def conv_shard(conv: np.ndarray, groups: list[int], tp: int, rank: int) -> np.ndarray:
    """Rank RANK's conv state of attention TP TP: its share of each sub-block, concatenated `[q_r | k_r | v_r]`
    (channel axis 1 of `[layers, channels, ...]`)."""
    parts, start = [], 0
    for width in groups:
        share = width // tp
        parts.append(conv[:, start + rank * share:start + (rank + 1) * share])
        start += width
    return np.concatenate(parts, axis=1)


def temporal_shard(ssm: np.ndarray, tp: int, rank: int) -> np.ndarray:
    """Rank RANK's temporal state: its value heads (axis 1 of `[layers, heads, ...]`)."""
    share = ssm.shape[1] // tp
    return ssm[:, rank * share:(rank + 1) * share]


def cache_params(spec: SideSpec) -> Any:
    """SGLang's Mamba2CacheParams for the rank published last: Qwen3-Next's config class computes the state
    shape per rank from the linear_* fields and the runtime's linear-attention TP, with SGLang's state dtypes
    (conv bf16, SSM float32 unless config.json's mamba_ssm_dtype says otherwise)."""
    from sglang.srt.configs.qwen3_next import Qwen3NextConfig

    lin = spec.linear or {}
    kwargs = {"mamba_ssm_dtype": "bfloat16"} if lin.get("ssm_bytes") == 2 else {}
    layers = len(spec.full_layers) + len(spec.linear_layers)
    # the layer layout SGLang derives from the interval is not used: the pools get the spec's layer ids
    interval = spec.full_layers[0] + 1 if spec.full_layers else layers
    cfg = Qwen3NextConfig(num_hidden_layers=layers, full_attention_interval=interval, num_attention_heads=max(spec.kv_heads, spec.tp),
                          num_key_value_heads=spec.kv_heads, head_dim=spec.head_dim,
                          hidden_size=spec.kv_heads * spec.head_dim, vocab_size=1000,
                          linear_num_key_heads=lin["num_key_heads"], linear_num_value_heads=lin["num_value_heads"],
                          linear_key_head_dim=lin["key_head_dim"], linear_value_head_dim=lin["value_head_dim"],
                          linear_conv_kernel_dim=lin["conv_kernel"], **kwargs)
    return cfg.mamba2_cache_params


class RankState:
    """SGLang's request pool (and its MambaPool) for one rank, the request's mamba slot, fill and check."""

    def __init__(self, spec: SideSpec, rank: int, gpu: int = 0, *, slot: int) -> None:
        params = cache_params(spec)
        common = {"size": REQUESTS, "max_context_len": max(256, 2 * spec.tokens),
                  "device": "cpu" if spec.device == "cpu" else f"cuda:{gpu}", "enable_memory_saver": False,
                  "cache_params": params, "mamba_layer_ids": list(spec.linear_layers),
                  "enable_mamba_extra_buffer": False, "mamba_size": REQUESTS + 1, "speculative_num_draft_tokens": None,
                  "enable_overlap_schedule": True}
        if spec.role == "prefill":
            from sglang.srt.mem_cache.memory_pool import HybridReqToTokenPool

            self.req_pool = HybridReqToTokenPool(mamba_spec_state_size=REQUESTS, **common)
        else:
            from sglang.srt.disaggregation.decode import HybridMambaDecodeReqToTokenPool

            self.req_pool = HybridMambaDecodeReqToTokenPool(pre_alloc_size=0, **common)
        self.spec, self.rank, self.slot = spec, rank, slot
        cache = self.req_pool.mamba_pool.mamba_cache
        if len(cache.conv) != 1:
            raise ValueError(f"expected one conv state tensor (Gated DeltaNet), SGLang built {len(cache.conv)}")
        self.conv, self.temporal = cache.conv[0], cache.temporal
        if self.slot >= self.conv.shape[1]:
            raise ValueError(f"mamba slot {self.slot} outside SGLang's pool of {self.conv.shape[1]} slots")
        self.clear()

    @property
    def mamba_pool(self) -> Any:
        return self.req_pool.mamba_pool

    def _views(self) -> tuple[Any, Any]:
        """The state tensors as bytes: conv `[layers, slots, channels, bytes]`, temporal `[layers, slots, heads,
        value dim, bytes]`."""
        import torch

        conv = self.conv.view(torch.uint8).reshape(*self.conv.shape[:-1], -1)
        ssm = self.temporal.view(torch.uint8).reshape(*self.temporal.shape[:-1], -1)
        return conv, ssm

    def _mine(self) -> tuple[np.ndarray, np.ndarray]:
        lin = self.spec.linear or {}
        conv, ssm = global_state(lin, len(self.spec.linear_layers), self.conv.element_size(),
                                 self.temporal.element_size(), self.spec.seed)
        return (conv_shard(conv, conv_groups(lin), self.spec.tp, self.rank),
                temporal_shard(ssm, self.spec.tp, self.rank))

    def clear(self) -> None:
        self.conv.zero_()
        self.temporal.zero_()

    def fill(self, corrupt: bool = False) -> None:
        """The request's state into its slot (prefill); CORRUPT flips one byte of it (the tests' fault)."""
        import torch

        conv, ssm = self._mine()
        if corrupt:
            ssm = ssm.copy()
            ssm.reshape(-1)[ssm.size // 2] ^= 0xFF
        views = self._views()
        views[0][:, self.slot].copy_(torch.from_numpy(np.ascontiguousarray(conv)))
        views[1][:, self.slot].copy_(torch.from_numpy(np.ascontiguousarray(ssm)))

    def nbytes(self) -> int:
        """Bytes of the request's state on this rank (one slot of every layer)."""
        return (self.conv[:, self.slot].numel() * self.conv.element_size()
                + self.temporal[:, self.slot].numel() * self.temporal.element_size())

    def mismatched_bytes(self) -> int:
        """Bytes of every slot that differ from what they must hold: this rank's share of the request's state
        in its slot, zero everywhere else."""
        conv, ssm = self._mine()
        bad = 0
        for view, mine in zip(self._views(), (conv, ssm), strict=True):
            got = view.cpu().numpy()
            want = np.zeros_like(got)
            want[:, self.slot] = mine
            bad += int(np.count_nonzero(got != want))
        return bad
