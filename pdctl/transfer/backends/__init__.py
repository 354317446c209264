"""KV transfer backends (NIXL, Mooncake) behind one protocol (base.py); factory.py creates one by its name in
pdctl.transfer.registry, the one table of backends."""

from pdctl.transfer.backends.base import (
    Notification,
    TransferBackend,
    TransferError,
    flatten_blocks,
)
from pdctl.transfer.backends.factory import create_backend

__all__ = ["Notification", "TransferBackend", "TransferError", "create_backend", "flatten_blocks"]
