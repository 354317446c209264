"""The reference engine's PD roles (`--role prefill|decode`), loaded lazily by `roles.make_role`.

PrefillRole runs the bootstrap server and writes KV; DecodeRole registers, asks per room and waits. See
pd_prefill.py / pd_decode.py; the protocol they share is described in pdctl/transfer/bootstrap.py.
"""

from pdctl.reference.pd_decode import DecodeRole
from pdctl.reference.pd_prefill import PrefillRole

__all__ = ["DecodeRole", "PrefillRole"]
