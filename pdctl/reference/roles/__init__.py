"""The reference engine's roles: how a request's KV reaches (or leaves) this server.

base.py is the plug-in protocol the scheduler calls; colocated.py needs no transfer; prefill.py and decode.py
move KV with a transfer backend (pdctl.transfer.backends), using bootstrap.py (prefill's bootstrap HTTP server
and decode's client), sender.py (SGLang's address rule over pdctl.plan) and handshake.py (what the two sides
must agree on). Prefill/decode are imported only when asked for: they need numpy and a transfer library.
sglang_stack.py holds the same two roles on SGLang's own transfer stack (`--transfer-stack sglang`, run in
SGLang's interpreter); which classes a stack uses is its entry in pdctl.transfer.registry.STACKS.
"""

from __future__ import annotations

import importlib

from pdctl.reference.roles.base import Role, RoleContext
from pdctl.reference.roles.colocated import ColocatedRole
from pdctl.transfer.registry import stack


def make_role(name: str, ctx: RoleContext) -> Role:
    """The role object for --role NAME; prefill/decode modules are imported only here."""
    if name == "colocated":
        return ColocatedRole(ctx)
    roles = stack(ctx.settings.transfer_stack).roles  # --transfer-stack: whose code moves the KV
    if name not in roles:
        raise ValueError(f"unknown role {name!r}")
    module, attr = roles[name].split(":")
    return getattr(importlib.import_module(module), attr)(ctx)
