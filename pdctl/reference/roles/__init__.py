"""The reference engine's roles: how a request's KV reaches (or leaves) this server.

base.py is the plug-in protocol the scheduler calls; colocated.py needs no transfer; prefill.py and decode.py
move KV with a transfer backend (pdctl.transfer.backends), using bootstrap.py (prefill's bootstrap HTTP server
and decode's client), sender.py (SGLang's address rule over pdctl.plan) and handshake.py (what the two sides
must agree on). Prefill/decode are imported only when asked for: they need numpy and a transfer library.
"""

from __future__ import annotations

import importlib

from pdctl.reference.roles.base import Role, RoleContext
from pdctl.reference.roles.colocated import ColocatedRole

ROLE_CLASSES = {"prefill": "pdctl.reference.roles.prefill:PrefillRole", "decode": "pdctl.reference.roles.decode:DecodeRole"}
# `--transfer-stack sglang`: the same roles on SGLang's own transfer stack (needs SGLang's interpreter).
SGLANG_ROLE_CLASSES = {"prefill": "pdctl.transfer.sglang_stack.engine_roles:SGLangPrefillRole",
                       "decode": "pdctl.transfer.sglang_stack.engine_roles:SGLangDecodeRole"}


def make_role(name: str, ctx: RoleContext) -> Role:
    """The role object for --role NAME; prefill/decode modules are imported only here."""
    if name == "colocated":
        return ColocatedRole(ctx)
    if name not in ROLE_CLASSES:
        raise ValueError(f"unknown role {name!r}")
    table = SGLANG_ROLE_CLASSES if ctx.settings.transfer_stack == "sglang" else ROLE_CLASSES
    module, attr = table[name].split(":")
    return getattr(importlib.import_module(module), attr)(ctx)
