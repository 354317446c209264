"""Timeouts that turn PD failures into hangs: the bootstrap, waiting and heartbeat limits in engine.env.

SGLang fails a request whose KV never arrives after SGLANG_DISAGGREGATION_WAITING_TIMEOUT (decode) or whose
decode never shows up after SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (prefill), 300 s each, and declares a
prefill dead after HEARTBEAT_INTERVAL x HEARTBEAT_MAX_FAILURE seconds of missed probes. Deployment guides
that raise them "to be safe" (1e9, a day) make every broken transfer a request that hangs for that long
while holding its KV and admission slot (the stuck-room pattern of sglang PR #31800); a value SGLang cannot
parse ("1e9" for an integer) is silently replaced by the default.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.sglang import facts, messages
from pdctl.sglang.settings import DISAGG_TIMEOUTS, env_number

HANG_S = 3600  # above this, a failed transfer holds its request (and KV) for more than an hour


def _span(seconds: float) -> str:
    """'31.7 years', '2 days', '1.5 h' for a duration in seconds."""
    for unit, size in (("years", 365 * 86400), ("days", 86400), ("h", 3600)):
        if seconds >= size:
            return f"{seconds / size:.3g} {unit}"
    return f"{seconds:g} s"
HEARTBEAT = ("SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL", "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE")


def _unparsed(ctx: Context, name: str, value: str, kind: str, default: float) -> str:
    """What the judged release does with a value it cannot parse: EnvInt/EnvFloat warn and use the default
    (0.5.8+); before, get_int_env_var used the default silently and the heartbeat interval's float() raised."""
    if ctx.since(facts.ENV_WARNS_SINCE):
        return (f"{messages.env_invalid(name, value, kind, default)} (SGLang's warning; the value you meant is not "
                "in effect)")
    if kind == "float":
        return (f"{name}={value}: {ctx.version_words} reads it with float() and stops at startup (ValueError: could "
                f"not convert string to float: {value!r})")
    return (f"{name}={value}: {ctx.version_words} cannot parse it and uses the default {default:g} without a word "
            f"(its warning arrived in {facts.ENV_WARNS_SINCE}); the value you meant is not in effect")


def disagg_timeouts(ctx: Context) -> Outcome:
    """Huge, disabled-by-size or unparsable PD timeouts in the environment the servers get."""
    if not ctx.sglang:
        return passed(f"engine {ctx.topo.engine.kind}: reads --transfer-timeout, not SGLang's variables")
    problems: list[str] = []
    used: dict[str, float] = {}
    for role in ctx.roles():
        for name, (kind, default, _floor, side) in DISAGG_TIMEOUTS.items():
            if side != role.name or name not in role.env:
                continue
            value, unparsed = env_number(role.env, name)
            used[name] = value
            if unparsed is not None:
                problems.append(f"{role.name}: {_unparsed(ctx, name, unparsed, kind, default)}")
            elif name.endswith("TIMEOUT") and value > HANG_S:
                problems.append(f"{role.name}: {name}={role.env[name]}: a failed or stuck KV transfer holds its request "
                                f"and its KV for {_span(value)} instead of failing after {default:g} s")
            elif name.endswith("TIMEOUT") and value <= 0:
                problems.append(f"{role.name}: {name}={role.env[name]}: every request times out at once")
        if role.name == "decode" and any(n in role.env for n in HEARTBEAT):
            interval = env_number(role.env, HEARTBEAT[0])[0]
            failures = env_number(role.env, HEARTBEAT[1])[0]
            if interval * failures > HANG_S:
                problems.append(f"decode: heartbeat {interval:g} s x {failures:g} failures: a dead prefill is noticed "
                                f"after {_span(interval * failures)}; its requests hang until then")
    if problems:
        return fired("; ".join(problems))
    if not used:
        return passed("SGLang's default PD timeouts (bootstrap and waiting 300 s, heartbeat 5 s x 2)")
    return passed(", ".join(f"{n.removeprefix('SGLANG_DISAGGREGATION_')}={v:g}" for n, v in used.items()))
