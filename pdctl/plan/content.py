"""The content of one planned request's KV, for all heads, regenerated from a seed on both sides of a transfer.

bench-transfer's ranks (pdctl.bench.transfer.rankmem) and SGLang's own pools in a rehearsal
(pdctl.sglang_stack.pools) fill the prefill side from it and check the decode side against it, so
the expected bytes never travel between processes. Loads numpy (not imported by pdctl.plan's package).
"""

from __future__ import annotations

import numpy as np

from pdctl.plan.request import KVShape


def global_kv(shape: KVShape, seed: int) -> tuple[np.ndarray, np.ndarray | None]:
    """The request's KV for all heads: full `[2, Lf, P*ps, H, hb]`, SWA `[2, Ls, S*ps, H, hb]` (random bytes)."""
    rng = np.random.default_rng(seed)

    def make(layers: int, pages: int) -> np.ndarray:
        dims = (2, layers, pages * shape.page_size, shape.kv_heads, shape.head_bytes)
        return np.frombuffer(rng.bytes(int(np.prod(dims))), dtype=np.uint8).reshape(dims)

    full = make(shape.full_layers, shape.full_pages)
    swa = make(shape.swa_layers, shape.swa_pages) if shape.swa_layers and shape.swa_pages else None
    return full, swa
