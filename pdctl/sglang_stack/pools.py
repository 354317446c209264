"""One rank's KV pools for a rehearsal: SGLang's own pool classes at the topology's shape, pattern-filled on
the prefill side and checked byte for byte on the decode side.

Runs in SGLang's interpreter. The pools are SGLang's (`MHATokenToKVPool`, `SWAKVPool` for a hybrid
sliding-window model: full-attention layers in one pool, SWA layers in a window-sized one, or
`HybridLinearKVPool` for a hybrid linear-attention model: the full-attention layers' KV around the request
pool's MambaPool, whose state pdctl.sglang_stack.mamba fills and checks), on the CPU (DRAM) or a GPU (VRAM),
so the buffers SGLang registers have exactly the geometry a server's have. The content is the
seeded "global" KV of pdctl.plan.content (every head, every position), which both processes
regenerate: each prefill rank holds its heads of it, and the decode side checks that every slot of every
rank holds what pdctl.plan's head ownership says it must (`global_head`), and every other slot still zero.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from pdctl.plan import full_pages, global_head, heads_on_rank, swa_window_pages
from pdctl.plan.content import global_kv
from pdctl.plan.request import KVShape
from pdctl.sglang_stack.mamba import RankState
from pdctl.sglang_stack.spec import SideSpec


def request_shape(spec: SideSpec) -> KVShape:
    """The request's pages per pool, as pdctl.plan counts them (full: every page; SWA: the window)."""
    swa_pages = (len(swa_window_pages(spec.tokens, 0, spec.window, spec.page_size))
                 if spec.swa_layers and spec.window else 0)
    layers = len(spec.full_layers) + len(spec.swa_layers)
    return KVShape(full_layers=len(spec.full_layers) if swa_pages else layers, swa_layers=len(spec.swa_layers) if swa_pages else 0,
                   kv_heads=spec.kv_heads, head_bytes=spec.head_bytes, page_size=spec.page_size,
                   full_pages=len(full_pages(spec.tokens, 0, spec.page_size)), swa_pages=swa_pages)


class RankPools:
    """SGLang's pool for one rank, the request's page ids in it, and pattern fill / byte check."""

    def __init__(self, spec: SideSpec, rank: int, gpu: int = 0) -> None:
        import torch
        from sglang.srt.mem_cache.memory_pool import HybridLinearKVPool, MHATokenToKVPool
        from sglang.srt.mem_cache.swa_memory_pool import SWAKVPool

        self.spec, self.rank = spec, rank
        self.shape = request_shape(spec)
        self.heads = heads_on_rank(spec.kv_heads, spec.tp)
        self.first_head = global_head(spec.kv_heads, spec.tp, rank, 0)
        ps = spec.page_size
        # The decode side uses other page ids than the prefill (one page further), so a transfer that
        # ignored the destination's page list would show.
        offset = 1 if spec.role == "prefill" else 2
        self.full_ids = list(range(offset, offset + self.shape.full_pages))
        self.swa_ids = list(range(offset, offset + self.shape.swa_pages))
        # the request's mamba slot (a different one on each side, as its page ids are)
        self.state = RankState(spec, rank, gpu, slot=offset) if spec.linear_layers else None
        common = {"page_size": ps, "dtype": getattr(torch, spec.dtype), "head_num": self.heads,
                  "head_dim": spec.head_dim, "device": "cpu" if spec.device == "cpu" else f"cuda:{gpu}",
                  "enable_memory_saver": False}
        hnd = spec.kv_layout == "hnd"
        old = os.environ.get("SGLANG_USE_HND_KVCACHE")
        if hnd:  # SGLang's HND switch is this variable (the pool reads it at construction)
            os.environ["SGLANG_USE_HND_KVCACHE"] = "1"
        try:
            if self.shape.swa_layers:
                self.pool = SWAKVPool(size=(self.shape.full_pages + offset + 1) * ps,
                                      size_swa=(self.shape.swa_pages + offset + 1) * ps,
                                      swa_attention_layer_ids=list(spec.swa_layers),
                                      full_attention_layer_ids=list(spec.full_layers), **common)
                self.full_pool, self.swa_pool = self.pool.full_kv_pool, self.pool.swa_kv_pool
            elif self.state is not None:  # as kv_cache_configurator.py builds it around the request pool's state
                self.pool = HybridLinearKVPool(size=(self.shape.full_pages + offset + 1) * ps,
                                               full_attention_layer_ids=list(spec.full_layers),
                                               mamba_pool=self.state.mamba_pool, **common)
                self.full_pool, self.swa_pool = self.pool.full_kv_pool, None
            else:
                self.pool = MHATokenToKVPool(size=(self.shape.full_pages + offset + 1) * ps,
                                             layer_num=self.shape.full_layers, **common)
                self.full_pool, self.swa_pool = self.pool, None
        finally:
            if hnd:
                if old is None:
                    os.environ.pop("SGLANG_USE_HND_KVCACHE", None)
                else:
                    os.environ["SGLANG_USE_HND_KVCACHE"] = old
        self.clear()

    def clear(self) -> None:
        """Zero every buffer (the decode side, before each request it receives)."""
        for pool in self._pools().values():
            for buf in [*pool.k_buffer, *pool.v_buffer]:
                buf.zero_()
        if self.state is not None:
            self.state.clear()

    @property
    def req_pool(self) -> Any:
        """SGLang's request pool when it owns transferred state (the MambaPool), else None."""
        return self.state.req_pool if self.state is not None else None

    def _pools(self) -> dict[str, Any]:
        return {"full": self.full_pool} | ({"swa": self.swa_pool} if self.swa_pool is not None else {})

    def page_ids(self, name: str) -> list[int]:
        return self.full_ids if name == "full" else self.swa_ids

    def nbytes(self) -> int:
        """Bytes of the request's KV on this rank (what the rank holds of it)."""
        s = self.shape
        tokens = s.full_layers * s.full_pages + s.swa_layers * s.swa_pages
        return 2 * tokens * s.page_size * self.heads * s.head_bytes + self.state_nbytes()

    def state_nbytes(self) -> int:
        """Bytes of the request's mamba state on this rank (0 without linear attention)."""
        return self.state.nbytes() if self.state is not None else 0

    def _expected(self, kv: np.ndarray, name: str, rows: int) -> np.ndarray:
        """What one pool's layers must hold: [kv, layer, rows, heads, head_bytes] bytes."""
        s, ps = self.shape, self.spec.page_size
        want = np.zeros((2, kv.shape[1], rows, self.heads, s.head_bytes), dtype=np.uint8)
        mine = kv[:, :, :, self.first_head:self.first_head + self.heads]
        for i, page in enumerate(self.page_ids(name)):
            want[:, :, page * ps:(page + 1) * ps] = mine[:, :, i * ps:(i + 1) * ps]
        return want

    def _views(self, pool: Any) -> list[Any]:
        import torch

        return [b.view(torch.uint8).reshape(b.shape[0], self.heads, -1) for b in [*pool.k_buffer, *pool.v_buffer]]

    def fill(self, corrupt_state: bool = False) -> None:
        """Write this rank's heads of the seeded global KV into the request's pages, and its share of the
        request's mamba state into its slot (the prefill's state; CORRUPT_STATE: one byte off, a test's fault)."""
        import torch

        if self.state is not None:
            self.state.fill(corrupt=corrupt_state)
        kv = dict(zip(("full", "swa"), global_kv(self.shape, self.spec.seed), strict=True))
        for name, pool in self._pools().items():
            views = self._views(pool)
            want = self._expected(kv[name], name, views[0].shape[0])
            layers = want.shape[1]
            for i, view in enumerate(views):
                view.copy_(torch.from_numpy(want[i // layers, i % layers]))

    def mismatched_bytes(self) -> int:
        """Bytes of this rank's pools that differ from what they must hold after the transfer (stray writes
        into other pages, the padding page included, count)."""
        kv = dict(zip(("full", "swa"), global_kv(self.shape, self.spec.seed), strict=True))
        bad = 0
        for name, pool in self._pools().items():
            views = self._views(pool)
            want = self._expected(kv[name], name, views[0].shape[0])
            layers = want.shape[1]
            for i, view in enumerate(views):
                bad += int(np.count_nonzero(view.cpu().numpy() != want[i // layers, i % layers]))
        return bad + self.state_mismatched_bytes()

    def state_mismatched_bytes(self) -> int:
        """The mamba state's part of mismatched_bytes (every slot of every linear layer checked)."""
        return self.state.mismatched_bytes() if self.state is not None else 0
