"""KV transfer backends (NIXL, Mooncake) behind one protocol (base.py); factory.py picks one by name."""

from pdctl.transfer.backends.base import (
    BACKENDS,
    Notification,
    TransferBackend,
    TransferError,
    flatten_blocks,
)
from pdctl.transfer.backends.factory import create_backend

__all__ = ["BACKENDS", "Notification", "TransferBackend", "TransferError", "create_backend", "flatten_blocks"]
