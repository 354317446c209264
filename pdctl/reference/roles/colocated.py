"""The colocated role: no disaggregation, so no KV transfer; the scheduler prefills and decodes itself."""

from __future__ import annotations

from pdctl.reference.roles.base import DecodeDone, FirstToken, KVHandle, PrefillDone, RequestInfo, RoleContext


class ColocatedRole:
    """No disaggregation: the scheduler prefills and decodes itself; the hooks are never called."""

    name = "colocated"

    def __init__(self, ctx: RoleContext | None = None) -> None:
        self.ctx = ctx

    def start(self) -> None:
        """Nothing to start."""

    def shutdown(self) -> None:
        """Nothing to stop."""

    def after_prefill(self, req: RequestInfo, kv: KVHandle, first: FirstToken, done: PrefillDone) -> None:
        """Never called for colocated serving."""
        raise RuntimeError("colocated role has no prefill hook")

    def before_decode(self, req: RequestInfo, kv: KVHandle, done: DecodeDone) -> None:
        """Never called for colocated serving."""
        raise RuntimeError("colocated role has no decode hook")

    def abort_request(self, req: RequestInfo, message: str) -> None:
        """No peer to tell."""
