"""Create a transfer backend endpoint by name: the registry (pdctl.transfer.registry) says which module implements
it, and that module (and its library) is imported only here, when an endpoint is created.

Processes that create a backend should end through `pdctl.procexit` (their entry point's business, not this
module's): NIXL 1.5.1 can crash in native destructors at interpreter exit.
"""

from __future__ import annotations

import importlib

from pdctl.transfer.backends.base import TransferBackend
from pdctl.transfer.registry import backend


def create_backend(kind: str, name: str, *, host: str = "127.0.0.1") -> TransferBackend:
    """Create an endpoint of backend KIND (a name of pdctl.transfer.registry); HOST is the address peers reach
    us at (for backends whose endpoints advertise one)."""
    module, cls = backend(kind).implementation.split(":")
    return getattr(importlib.import_module(module), cls)(name, host=host)
