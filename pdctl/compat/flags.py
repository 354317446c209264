"""Rules over the rendered command lines themselves: do they parse with the SGLang release that runs them,
and does an `args:` entry silently replace a setting the topology owns?

SGLang's parser stops at the first bad flag (argument parsing, before anything is loaded); pdctl lists every
bad flag of every process at once, with did-you-mean, the allowed choices, and for a flag that was removed or
renamed the release that changed it.
"""

from __future__ import annotations

from pdctl.compat.context import Context
from pdctl.compat.findings import Outcome, fired, passed
from pdctl.reference.args import build_parser
from pdctl.render.sglang import RENDERED_FROM

# The reference engine's own dests for the keys it is rendered from (its flags follow SGLang's names).
REFERENCE_RENDERED = {"tp": "tp", "role": "the role section (prefill: / decode:)", "kv_layout": "kv_layout"}


def _dedupe(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))


def flags_parse(ctx: Context) -> Outcome:
    """Every rendered command must parse with the judged release's flag table (the reference engine: with its
    own parser, and its `args:` with the release's table too, since the real run gets them)."""
    lines = [f"{i.process}: {p.message}" for i in ctx.eff.issues for p in i.problems]
    parser = f"SGLang {ctx.eff.table.version}'s" if ctx.eff.table else (
        f"the reference engine's (and, for args:, SGLang {ctx.eff.version.version}'s)")
    if lines:
        return fired(f"{parser} parser rejects the commands: " + "; ".join(_dedupe(lines)))
    return passed(f"{len(ctx.eff.argv)} command(s) parse with {parser} flags")


def flags_deprecated(ctx: Context) -> Outcome:
    """Deprecated spellings still run, but their removal is announced: say so before it costs a job."""
    if not ctx.sglang:
        return passed("reference engine")
    lines = _dedupe([w for i in ctx.eff.issues for w in i.warnings])
    if lines:
        return fired("; ".join(lines))
    return passed("no deprecated flags")


def reference_ignores_args(ctx: Context) -> Outcome:
    """A rehearsal on the reference engine runs without the SGLang flags it does not implement: say which, so
    that a rehearsal that passes is not read as a proof that those settings work."""
    if ctx.sglang:
        return passed("SGLang runs every flag itself")
    flags = list(dict.fromkeys(f for names in ctx.eff.ignored.values() for f in names))
    if flags:
        return fired(f"the reference engine ignores {', '.join(flags)} (SGLang {ctx.eff.version.version} "
                     "flags from args:): this rehearsal runs without them, the real SGLang run with them")
    return passed("the reference engine runs every args: flag" if any(r.intent.args for r in ctx.roles())
                  else "no args")


def _dest(ctx: Context, name: str) -> str | None:
    """The dest an `args:` key sets, resolved as the engine's parser would (aliases, unique prefixes)."""
    option = "--" + name
    if ctx.eff.table is not None:
        flag, _ = ctx.eff.table.resolve(option)
        return flag.dest if flag is not None else None
    action = build_parser()._option_string_actions.get(option)
    return action.dest if action is not None else None


def args_override(ctx: Context) -> Outcome:
    """An `args:` flag that pdctl already renders from a topology key would run something else than the
    topology says (TP 8 on GPUs placed for TP 2; no --disaggregation-mode): refuse it and name the key."""
    owners = {**RENDERED_FROM, **({} if ctx.sglang else REFERENCE_RENDERED)}
    where: dict[tuple[str, str, str], list[str]] = {}
    for role in ctx.roles():
        for name, value in role.intent.args.items():
            dest = _dest(ctx, name)
            if dest in owners:
                where.setdefault((name, repr(value), dest), []).append(role.name)
    if where:
        bad = []
        for (name, value, dest), names in where.items():
            how = "removes" if value in ("None", "False") else "overrides"
            bad.append(f"args {name}: {value} ({'/'.join(names)}) {how} the --{dest.replace('_', '-')} pdctl "
                       f"renders from {owners[dest]}: set {owners[dest]} instead")
        return fired("; ".join(bad))
    n = sum(len(r.intent.args) for r in ctx.roles())
    return passed(f"{n} args entr{'y' if n == 1 else 'ies'}, none duplicating a topology key" if n else "no args")
