"""TEST HOOK — never for a real deployment: a decode server that computes on corrupted KV.

Why it exists: `pdctl parity` claims to catch a PD deployment whose decode attends to wrong KV; that claim
is only worth something if it is tested saying no on realistic corruptions. This module damages the KV a
decode server has just received, after the transfer completed and before the first decode step, the way
real transfer bugs do:

- `swap-heads`  two KV heads swapped on decode rank 0 (a head-slice offset off by one head);
- `page-shift`  every page written one page late (page i holds page i-1's tokens; the first page stale);
- `stale-swa`   the sliding-window layers' pages keep what they held before the transfer (lost SWA writes);
- `zero-layer`  one layer's K zeroed (default: the first full-attention layer; `layer=L` picks another);
- `fp8`         every K and V rounded to float8 e4m3 (scale 1: an FP8 KV cache nobody asked for);
- `none`        nothing (the hook armed but idle, e.g. before a test switches it on).

Modifiers (comma-separated after the kind): `from=P` corrupts token positions >= P only, `after=K` leaves
the first K received requests intact (a fault that appears after K served requests). Example:
`zero-layer,from=256` or `fp8,after=40`.

How it is armed — two keys, so that it cannot happen by accident: the hidden flag `--test-hook-corrupt-kv
SPEC` on a decode server AND the environment variable `PDCTL_ENABLE_TEST_HOOKS=1` in that server's
environment; either alone refuses to start (exit 2). An armed server logs a warning at start and for every
corrupted request, shows the spec in `/server_info` (`test_hook_corrupt_kv`), and accepts
`POST /test_hook/corrupt_kv {"spec": ...}` to change the corruption at run time (tests reuse one deployment
for several corruptions). A server started without the hook has no such route.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

ENV = "PDCTL_ENABLE_TEST_HOOKS"
FLAG = "--test-hook-corrupt-kv"
KINDS = ("none", "swap-heads", "page-shift", "stale-swa", "zero-layer", "fp8")

log = logging.getLogger("pdctl.reference.testhook")


@dataclass(frozen=True)
class CorruptSpec:
    """What to corrupt: KIND, from token position START on, after AFTER intact requests, in LAYER."""

    kind: str = "none"
    start: int = 0
    after: int = 0
    layer: int | None = None

    def describe(self) -> str:
        parts = [self.kind]
        if self.start:
            parts.append(f"from={self.start}")
        if self.after:
            parts.append(f"after={self.after}")
        if self.layer is not None:
            parts.append(f"layer={self.layer}")
        return ",".join(parts)


def parse_spec(text: str) -> CorruptSpec:
    """`KIND[,from=P][,after=K][,layer=L]`; ValueError with a message on anything else."""
    kind, *mods = [p.strip() for p in str(text).split(",") if p.strip()] or ["none"]
    if kind not in KINDS:
        raise ValueError(f"unknown corruption {kind!r}; expected one of {', '.join(KINDS)}")
    values: dict[str, int] = {}
    for mod in mods:
        key, sep, raw = mod.partition("=")
        if not sep or key not in ("from", "after", "layer") or not raw.isdigit():
            raise ValueError(f"bad modifier {mod!r}: expected from=P, after=K or layer=L (non-negative integers)")
        values[key] = int(raw)
    return CorruptSpec(kind, values.get("from", 0), values.get("after", 0), values.get("layer"))


def _token_rows(pool: Any, layer: int, pages: list[int]) -> tuple[Any, Any]:
    import torch

    return pool.read(layer, torch.tensor(pages, dtype=torch.long))


def _put_rows(pool: Any, layer: int, pages: list[int], k: Any, v: Any) -> None:
    import torch

    ps = pool.page_size
    page_ids = torch.tensor(pages, dtype=torch.long).repeat_interleave(ps)
    offsets = torch.arange(ps, dtype=torch.long).repeat(len(pages))
    pool.write(layer, page_ids, offsets, k, v)


class KVCorruptor:
    """Applies the current spec to a request's received KV (decode receiver thread, before `done`)."""

    def __init__(self, spec: CorruptSpec, *, cfg: Any, kv: Any) -> None:
        self.cfg, self.kv = cfg, kv
        self._lock = threading.Lock()
        self.spec = spec
        self.received = 0  # requests received since the spec was set
        self.corrupted = 0
        self._check(spec)

    def _check(self, spec: CorruptSpec) -> None:
        layers = self.cfg.num_hidden_layers
        if spec.layer is not None and spec.layer >= layers:
            raise ValueError(f"layer={spec.layer}: the model has {layers} layers")
        if spec.kind == "stale-swa" and not any(self.cfg.is_sliding(i) for i in range(layers)):
            raise ValueError("stale-swa: the model has no sliding-window layers")
        if spec.kind == "swap-heads" and self.kv.ranks[0].full.heads < 2 and len(self.kv.ranks) < 2:
            raise ValueError("swap-heads needs two KV heads on rank 0 or a second rank")

    def set(self, spec: CorruptSpec) -> None:
        """Switch to SPEC (counts restart: `after=K` counts from now)."""
        self._check(spec)
        with self._lock:
            self.spec, self.received, self.corrupted = spec, 0, 0
        log.warning("TEST HOOK: decode KV corruption is now %r", spec.describe())

    def state(self) -> dict[str, Any]:
        with self._lock:
            return {"spec": self.spec.describe(), "received": self.received, "corrupted": self.corrupted}

    # -- per request ---------------------------------------------------------------------------------
    def before_transfer(self, handle: Any) -> Any:
        """Called before decode asks for the KV: what stale-swa restores afterwards (else None)."""
        if self.spec.kind != "stale-swa":
            return None
        return {(r.rank, layer): _token_rows(pool, layer, pages)
                for r, (layer, pool, pages, _first) in self._sliding(handle)}

    def after_transfer(self, handle: Any, saved: Any) -> None:
        """Called once the KV arrived, before the request decodes: corrupt it when the spec says so."""
        with self._lock:
            spec = self.spec
            index = self.received
            self.received += 1
            due = spec.kind != "none" and index >= spec.after
            if due:
                self.corrupted += 1
        if not due:
            return
        log.warning("TEST HOOK: corrupting the received KV of a %d-token prompt (%s)", handle.prompt_len,
                    spec.describe())
        corrupt = {"swap-heads": self._swap_heads, "page-shift": self._page_shift, "stale-swa": self._stale_swa,
                   "zero-layer": self._zero_layer, "fp8": self._fp8}[spec.kind]
        corrupt(handle, spec, saved)

    # -- geometry --------------------------------------------------------------------------------------
    def _mask(self, handle: Any, first_page: int, n_pages: int, spec: CorruptSpec) -> Any:
        """Which token rows of logical pages [FIRST_PAGE, +N_PAGES) were received and are to be corrupted."""
        import torch

        ps = handle.page_size
        pos = torch.arange(first_page * ps, (first_page + n_pages) * ps)
        lo = max(spec.start, handle.cached_len)
        return ((pos >= lo) & (pos < handle.prompt_len))[:, None, None]

    def _layers(self, handle: Any) -> Any:
        """(rank, (layer, pool, physical pages, first logical page)) for every layer on every rank."""
        for r in handle.ranks:
            rank = self.kv.ranks[r.rank]
            for layer in range(self.cfg.num_hidden_layers):
                pool = rank.pool_for(layer)
                if pool is rank.swa:
                    pages, first = r.swa_pages, handle.swa_first_page
                else:
                    pages, first = r.full_pages, 0
                if pages:
                    yield r, (layer, pool, list(pages), first)

    def _sliding(self, handle: Any) -> Any:
        """Like _layers, sliding layers only, restricted to the window's pages."""
        for r, (layer, pool, pages, first) in self._layers(handle):
            if not self.cfg.is_sliding(layer):
                continue
            if first == 0 and handle.swa_first_page > 0:  # sliding layer in the full pool: its window pages
                pages, first = pages[handle.swa_first_page:], handle.swa_first_page
            if pages:
                yield r, (layer, pool, pages, first)

    def _rewrite(self, handle: Any, spec: CorruptSpec, change: Any, layers: Any = None) -> None:
        """Apply CHANGE(rank, layer, k, v) -> (k, v) to the masked rows of every (or LAYERS') page."""
        import torch

        for r, (layer, pool, pages, first) in layers if layers is not None else self._layers(handle):
            k, v = _token_rows(pool, layer, pages)
            nk, nv = change(r.rank, layer, k.clone(), v.clone())
            mask = self._mask(handle, first, len(pages), spec)
            _put_rows(pool, layer, pages, torch.where(mask, nk, k), torch.where(mask, nv, v))

    # -- the corruptions -------------------------------------------------------------------------------
    def _swap_heads(self, handle: Any, spec: CorruptSpec, _saved: Any) -> None:
        heads = self.kv.ranks[0].full.heads
        if heads >= 2:
            def change(rank: int, layer: int, k: Any, v: Any) -> tuple[Any, Any]:
                if rank == 0:
                    k[:, [0, 1]], v[:, [0, 1]] = k[:, [1, 0]], v[:, [1, 0]]
                return k, v
            self._rewrite(handle, spec, change)
            return
        # one head per rank: rank 0's head gets rank 1's and the other way round
        rows = {(r.rank, layer): _token_rows(pool, layer, pages) for r, (layer, pool, pages, _f) in self._layers(handle)}

        def swap(rank: int, layer: int, k: Any, v: Any) -> tuple[Any, Any]:
            other = {0: 1, 1: 0}.get(rank)
            if other is None or (other, layer) not in rows:
                return k, v
            return rows[(other, layer)][0].clone(), rows[(other, layer)][1].clone()
        self._rewrite(handle, spec, swap)

    def _page_shift(self, handle: Any, spec: CorruptSpec, _saved: Any) -> None:
        import torch

        ps = handle.page_size

        def change(rank: int, layer: int, k: Any, v: Any) -> tuple[Any, Any]:
            shifted = []
            for x in (k, v):
                y = torch.zeros_like(x)
                y[ps:] = x[:-ps]
                shifted.append(y)
            return shifted[0], shifted[1]
        self._rewrite(handle, spec, change)

    def _stale_swa(self, handle: Any, spec: CorruptSpec, saved: Any) -> None:
        def change(rank: int, layer: int, k: Any, v: Any) -> tuple[Any, Any]:
            old = (saved or {}).get((rank, layer))
            return (old[0], old[1]) if old is not None else (k, v)
        self._rewrite(handle, spec, change, layers=list(self._sliding(handle)))

    def _zero_layer(self, handle: Any, spec: CorruptSpec, _saved: Any) -> None:
        target = spec.layer
        if target is None:
            target = next((i for i in range(self.cfg.num_hidden_layers) if not self.cfg.is_sliding(i)), 0)

        def change(rank: int, layer: int, k: Any, v: Any) -> tuple[Any, Any]:
            if layer == target:
                k.zero_()
            return k, v
        self._rewrite(handle, spec, change)

    def _fp8(self, handle: Any, spec: CorruptSpec, _saved: Any) -> None:
        import torch

        def change(rank: int, layer: int, k: Any, v: Any) -> tuple[Any, Any]:
            f8 = torch.float8_e4m3fn
            return k.clamp(-448, 448).to(f8).to(k.dtype), v.clamp(-448, 448).to(f8).to(v.dtype)
        self._rewrite(handle, spec, change)


def from_args(spec_text: str | None, *, cfg: Any, kv: Any) -> KVCorruptor | None:
    """The armed corruptor for --test-hook-corrupt-kv (args.py has checked the two keys), or None."""
    if spec_text is None:
        return None
    corruptor = KVCorruptor(parse_spec(spec_text), cfg=cfg, kv=kv)
    log.warning("TEST HOOK ARMED (%s): this decode server CORRUPTS the KV it receives (%r). It exists only to "
                "test pdctl parity; never use it in a real deployment.", FLAG, spec_text)
    return corruptor
