"""The PD plug-in point: how the scheduler hands a request's KV pages to a prefill or decode role.

The scheduler owns model steps, pages and HTTP responses; a role owns the KV transfer. Three roles exist:
`ColocatedRole` (roles/colocated.py: no transfer), and `PrefillRole` / `DecodeRole` (roles/prefill.py,
roles/decode.py; imported lazily by `roles.make_role`, constructed as `Role(ctx: RoleContext)`).

Thread model (binding for implementers):
- `start()` runs once on the main thread before the server accepts requests (bind the bootstrap server,
  register `ctx.kv.ranks[r].pools()` memory with the backend); `shutdown()` once at exit.
- `after_prefill` / `before_decode` are called ON THE ENGINE THREAD and must return quickly: start the
  transfer on your own threads. Every page id you are given stays valid (not reused) until you call
  `done(...)`. Call `done` exactly once, from any thread; the scheduler marshals it back to its thread.
- Prefill: the scheduler has run the prompt forward (prefix cache allowed: `kv.cached_len` tokens came
  from the cache, their pages are listed too) and sampled the first output token (`first`). Send the
  prompt's KV (full pages: all `full_pages`; SWA: `swa_pages`, which cover only the window
  `[swa_first_page * page_size, prompt_len)`) and `first` to the decode side, then `done(None)` or
  `done("error message")`. The HTTP response (input logprobs, first token) is sent after `done`; an
  error message becomes an error response.
- Decode: the scheduler skips the prompt forward, allocates the prompt's pages (all full pages; SWA pages
  from `swa_first_page`) and calls `before_decode`. Receive KV into those pages and the first token from
  prefill, then `done(FirstToken(...))`, or `done("error message")` (timeout, handshake rejection) which
  answers the request with that error at once. The request then decodes from position `prompt_len`.
- Page ids are identical on every rank; each rank has its own memory (`ctx.kv.ranks[r]`), so a transfer
  goes rank by rank with SGLang's address rule (`pdctl.plan`), using `pool.kv_ptrs()` / `pool.item_lens()`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from pdctl.reference.config import ModelConfig
    from pdctl.reference.kvcache import KVCache


@dataclass(frozen=True)
class PDSettings:
    """The server's PD flags (ARCHITECTURE.md), stored for the role; colocated ignores them."""

    host: str = "127.0.0.1"
    transfer_backend: str = "nixl"
    bootstrap_port: int = 8998
    transfer_timeout: float = 30.0
    unsafe_skip_handshake_checks: bool = False
    kv_cache_dtype: str = "auto"
    kv_layout: str = "nhd"
    page_size: int = 16
    hybrid_swa_memory: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class RoleContext:
    """What a role gets at construction: model shape, TP size, every rank's KV pools, and the PD flags."""

    model: ModelConfig
    tp: int
    kv: KVCache
    settings: PDSettings
    model_path: str
    heads_on_rank: int
    # Bootstrap rooms of the requests the server holds (set by build_engine to the scheduler's live_rooms):
    # the liveness exchange between PD peers tells "slow" (still holds the room) from "lost it".
    live_rooms: Callable[[], set[int]] = field(default=lambda: set())
    # The server's pdctl.metrics.engine.EngineMetrics: roles count transfers (transfer_done / transfer_failed).
    metrics: Any = None


@dataclass(frozen=True)
class FirstToken:
    """The first output token, computed by prefill and carried to decode (SGLang's aux data)."""

    token_id: int
    logprob: float
    top_logprobs: list[tuple[float, int]] = field(default_factory=list)  # (logprob, token id), best first


@dataclass(frozen=True)
class RequestInfo:
    """What a role needs to know about a request (bootstrap_* come from the HTTP body, as in SGLang)."""

    rid: str
    input_ids: list[int]
    bootstrap_host: str | None
    bootstrap_port: int | None
    bootstrap_room: int | None
    top_logprobs_num: int = 0


@dataclass(frozen=True)
class RankPages:
    """One rank's page ids for a request (same ids on every rank; memory differs)."""

    rank: int
    full_pages: list[int]
    swa_pages: list[int]  # physical SWA pages for logical pages swa_first_page, swa_first_page+1, ...


@dataclass(frozen=True)
class KVHandle:
    """A request's KV as a role sees it."""

    prompt_len: int
    cached_len: int  # tokens served from the prefix cache (prefill), or already present (decode radix cache)
    page_size: int
    swa_first_page: int  # logical index of swa_pages[0]
    ranks: list[RankPages]


PrefillDone = Callable[[str | None], None]
DecodeDone = Callable[["FirstToken | str"], None]


@runtime_checkable
class Role(Protocol):
    """The scheduler's view of a role (see the module docstring for the thread model)."""

    name: str

    def start(self) -> None:
        """Bring up role services (bootstrap server, backend registration) before serving."""

    def shutdown(self) -> None:
        """Stop role services; called once at server exit."""

    def after_prefill(self, req: RequestInfo, kv: KVHandle, first: FirstToken, done: PrefillDone) -> None:
        """Prefill role: send KV + FIRST for REQ asynchronously, then call DONE(None | error)."""

    def before_decode(self, req: RequestInfo, kv: KVHandle, done: DecodeDone) -> None:
        """Decode role: receive KV into KV's pages asynchronously, then DONE(FirstToken | error)."""

    def abort_request(self, req: RequestInfo, message: str) -> None:
        """REQ failed on this side before its transfer began (rejected, OOM): tell the PD peer at once."""
