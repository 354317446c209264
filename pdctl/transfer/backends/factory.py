"""Pick a transfer backend by name; each library is imported only when its backend is created.

Processes that create a backend should end through `pdctl.procexit` (their entry point's business, not this
module's): NIXL 1.5.1 can crash in native destructors at interpreter exit.
"""

from __future__ import annotations

from pdctl.transfer.backends.base import BACKENDS, TransferBackend


def create_backend(kind: str, name: str, *, host: str = "127.0.0.1") -> TransferBackend:
    """Create a backend endpoint of KIND ("nixl" | "mooncake"); `host` is the address peers reach us at."""
    if kind == "nixl":
        from pdctl.transfer.backends.nixl import NixlBackend

        return NixlBackend(name)
    if kind == "mooncake":
        from pdctl.transfer.backends.mooncake import MooncakeBackend

        return MooncakeBackend(name, host=host)
    from pdctl.errors import UserError

    raise UserError(f"unknown transfer backend {kind!r}: expected one of {', '.join(BACKENDS)}")
