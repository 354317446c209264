"""NIXL and the RDMA devices: which devices UCX really uses, by release (pdctl/sglang/facts.py).

Before SGLang 0.5.23 the NIXL backend never reads --disaggregation-ib-device (sglang PR #28737 added it): UCX
takes its devices from UCX_NET_DEVICES alone, so a topology that names its HCAs (transfer.ib_device or the
nodes' ib_devices, which pdctl renders as that flag) but leaves UCX_NET_DEVICES unset runs on every device UCX
finds, not the ones named (the field report: every transfer hangs until the timeout). From 0.5.23 the flag is
honoured, and port-suffixed names (mlx5_0:1) are refused when the server creates its NIXL agent.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import facts, messages

UCX_ENV = "UCX_NET_DEVICES"


def _named(ctx: Context) -> dict[str, str]:
    """role -> the --disaggregation-ib-device it runs with, for roles that do not set UCX_NET_DEVICES."""
    out = {}
    for role in ctx.roles():
        device = role.get("disaggregation_ib_device")
        if device and not role.env.get(UCX_ENV):
            out[role.name] = str(device)
    return out


def _ucx_value(devices: str) -> str:
    return ",".join(d if ":" in d else f"{d}:1" for d in (x.strip() for x in devices.split(",")) if d)


def nixl_ib_device(ctx: Context) -> Outcome:
    """NIXL before 0.5.23 ignores --disaggregation-ib-device: UCX_NET_DEVICES must name the devices."""
    if ctx.backend != "nixl" or not ctx.sglang:
        return passed(f"{ctx.backend}: reads its RDMA devices from --disaggregation-ib-device")
    named = _named(ctx)
    if not named:
        return passed(f"UCX_NET_DEVICES set, or no IB device named: UCX uses what {UCX_ENV} says")
    if ctx.since(facts.NIXL_IB_DEVICE_SINCE):
        return passed(f"{ctx.version_words} maps --disaggregation-ib-device to UCX's device list")
    roles = ", ".join(f"{r} ({d})" for r, d in named.items())
    return fired(f"{ctx.version_words}'s NIXL backend ignores --disaggregation-ib-device (read from "
                 f"{facts.NIXL_IB_DEVICE_SINCE} on, {facts.NIXL_IB_DEVICE_PR}): with {UCX_ENV} unset on {roles} "
                 "UCX opens every device it finds, not the ones the topology names; reported: every transfer "
                 f"hangs until the timeout. Set {UCX_ENV}={_ucx_value(next(iter(named.values())))} in engine.env")


def nixl_ib_device_port(ctx: Context) -> Outcome:
    """From 0.5.23 NIXL maps the flag's HCAs to UCX devices itself and refuses port-suffixed names."""
    if ctx.backend != "nixl" or not ctx.sglang or not ctx.since(facts.NIXL_IB_DEVICE_SINCE):
        return passed("the release's NIXL backend does not read --disaggregation-ib-device")
    bad = {r: d for r, d in _named(ctx).items() if any(":" in x for x in d.split(","))}
    if bad:
        return fired(f"{messages.NIXL_IB_DEVICE_PORT} ({', '.join(f'{r}: {d}' for r, d in bad.items())})")
    return passed("HCA names without port suffixes (or UCX_NET_DEVICES set)")
