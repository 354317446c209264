"""The pipeline check-compat judges: rendered deployment -> its commands parsed -> effective role settings.

The rules read `EffectiveRole`s, built from what `pdctl launch` really starts (the Deployment pdctl.render
made, handed in: check-compat never renders), parsed with the flag table of the SGLang version that runs
them (pdctl.sglang), so an `args:` override, an engine.env variable or a flag the renderer spells
differently is judged as SGLang will see it. The reference engine's commands are parsed with its own parser
(same flag names, fewer of them).
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pdctl.reference.args import build_parser
from pdctl.render.spec import flag_args, merge_flags
from pdctl.sglang.argv import ArgvProblem, ParsedArgs, parse_argv
from pdctl.sglang.settings import ServerSettings, env_bool, ucx_protocol
from pdctl.sglang.table import FlagTable, load_table
from pdctl.sglang.versions import VersionChoice, choose
from pdctl.transfer.registry import BACKENDS

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment

# Where a process's own flags start: argv = [python, "-m", module, *flags]
FLAGS_FROM = 3


@dataclass(frozen=True)
class EffectiveRole:
    """One role as its rendered command runs it (replica 0, node rank 0 stands for all: they share flags)."""

    name: str
    nodes: list[str]
    replicas: int
    intent: Any  # the topology's RoleConfig, for what the user wrote (messages, not-rendered checks)
    tp: int
    pp: int
    dp: int
    attn_dp: int
    page_size: int | None
    kv_cache_dtype: str
    kv_layout: str
    hybrid_swa_memory: bool
    unified_memory: bool
    chunked_prefill_size: int | None
    attention_backends: tuple[str, ...]
    radix_cache: bool
    backend: str
    transfer_backend: str
    protocol: str
    staging: bool
    values: dict[str, Any] = field(default_factory=dict)  # every parsed dest (SGLang) or reference flag
    env: dict[str, str] = field(default_factory=dict)  # the rendered process environment (engine.env included)

    @property
    def attn_tp(self) -> int:
        return max(1, self.tp // max(1, self.attn_dp))

    @property
    def enable_dp_attention(self) -> bool:
        return self.attn_dp > 1

    @property
    def gpus_per_replica(self) -> int:
        return self.tp * self.pp

    def get(self, dest: str, default: Any = None) -> Any:
        value = self.values.get(dest)
        return default if value is None else value


@dataclass(frozen=True)
class ProcessIssues:
    """Parse problems and deprecation warnings of one rendered process."""

    process: str
    problems: tuple[ArgvProblem, ...]
    warnings: tuple[str, ...]


@dataclass(frozen=True)
class Effective:
    """Everything the rules read besides the topology and the model: roles, version, per-process issues."""

    version: VersionChoice
    table: FlagTable | None  # None for the reference engine
    roles: dict[str, EffectiveRole]
    issues: list[ProcessIssues]
    argv: dict[str, list[str]]  # process name -> its flags (what was parsed)
    # the reference engine: process name -> the `args:` flags it ignores (SGLang flags the rehearsal lacks)
    ignored: dict[str, list[str]] = field(default_factory=dict)


def _sglang_role(intent: Any, settings: ServerSettings) -> EffectiveRole:
    return EffectiveRole(
        name=intent.name, nodes=list(intent.nodes), replicas=intent.replicas, intent=intent,
        tp=settings.tp, pp=settings.pp, dp=settings.dp, attn_dp=settings.attn_dp, page_size=settings.page_size,
        kv_cache_dtype=settings.kv_cache_dtype, kv_layout=settings.kv_layout,
        hybrid_swa_memory=settings.hybrid_swa_memory, unified_memory=settings.unified_memory,
        chunked_prefill_size=settings.chunked_prefill_size, attention_backends=tuple(settings.attention_backends),
        radix_cache=settings.radix_cache, backend=settings.backend, transfer_backend=settings.transfer_backend,
        protocol=settings.protocol, staging=settings.staging, values=dict(settings.values), env=dict(settings.env),
    )


def _reference_flags(flags: list[str]) -> tuple[Any, str | None]:
    """The reference engine's own parser on FLAGS: (namespace, None), or (None, its error message). Flags it
    does not know are left in the namespace's `_unknown` (the engine ignores them: `_ignored_args`)."""
    parser = build_parser()
    parser.exit_on_error = False
    try:
        with contextlib.redirect_stderr(io.StringIO()) as err:
            ns, unknown = parser.parse_known_args(flags)  # the engine ignores other SGLang flags
            ns._unknown = [u for u in unknown if u.startswith("--")]
    except argparse.ArgumentError as exc:
        return None, str(exc)
    except SystemExit:
        return None, err.getvalue().strip().splitlines()[-1] if err.getvalue().strip() else "invalid flags"
    return ns, None


def _sglang_args(intent: Any, table: FlagTable) -> ParsedArgs:
    """A reference topology's `args:` parsed as the real run's SGLang would parse them (the release's table):
    a rehearsal must reject a misspelled flag as the real launch would (the reference engine's parser keeps
    unknown flags and ignores them). The reference engine's own knobs (--numerics, --num-threads, ...) are
    not SGLang's, and are not problems: a rehearsal may set them."""
    own = set(build_parser()._option_string_actions)
    parsed = parse_argv(["--model-path", "x", *flag_args(intent.args)], table)
    problems = []
    for problem in parsed.problems:
        flag = (problem.flag or "").split("=")[0]
        if flag in own:
            continue
        close = difflib.get_close_matches(flag, sorted(own), n=1, cutoff=0.8) if flag else []
        if close and "did you mean" not in problem.message:
            problem = replace(problem, message=f"{problem.message}; did you mean {close[0]} (a reference-engine flag)?")
        problems.append(problem)
    return replace(parsed, problems=tuple(problems))


def _ignored_args(ns: Any, parsed: ParsedArgs) -> list[str]:
    """`args:` flags SGLang knows but the reference engine ignores: the rehearsal runs without them."""
    rejected = {p.flag for p in parsed.problems}
    return [flag.split("=", 1)[0] for flag in getattr(ns, "_unknown", []) if flag.split("=", 1)[0] not in rejected]


def _reference_role(intent: Any, ns: Any, env: dict[str, str]) -> EffectiveRole:
    backend = str(ns.disaggregation_transfer_backend)
    entry = BACKENDS.get(backend)  # the reference engine's backend reads its protocol from the entry's variable
    protocol = env.get(entry.protocol_env, "rdma") if entry and entry.protocol_env else ucx_protocol(env)
    return EffectiveRole(
        name=intent.name, nodes=list(intent.nodes), replicas=intent.replicas, intent=intent,
        tp=int(ns.tp), pp=1, dp=1, attn_dp=1, page_size=int(ns.page_size), kv_cache_dtype=str(ns.kv_cache_dtype),
        kv_layout=str(ns.kv_layout), hybrid_swa_memory=not ns.disable_hybrid_swa_memory, unified_memory=False,
        chunked_prefill_size=ns.chunked_prefill_size, attention_backends=(),
        radix_cache=bool(ns.disaggregation_decode_enable_radix_cache), backend=backend, transfer_backend=backend,
        protocol=protocol, staging=bool(env_bool(env, "SGLANG_DISAGG_STAGING_BUFFER")),
        values={k: v for k, v in vars(ns).items() if not k.startswith("_")}, env=dict(env),
    )


def _rendered_without_args(flags: list[str], args: dict[str, Any]) -> list[str]:
    """FLAGS without the `args:` entries (the renderer appends them last, replacing its own of the same name)."""
    return merge_flags(flags, {name: None for name in args})


def effective(deployment: Deployment, version: VersionChoice | None = None) -> Effective:
    """Read back every role's effective settings from DEPLOYMENT's commands (argv and env; what starts them,
    docker or srun, is not the engine's business).

    VERSION: the SGLang version judged (default: engine.version, else pdctl's default version)."""
    topo = deployment.topo
    version = version or choose(topo.engine.version)
    reference = topo.engine.kind == "reference"
    table = None if reference else load_table(version.table)
    sglang_table = load_table(version.table) if reference else None  # what the real run parses `args:` with
    roles: dict[str, EffectiveRole] = {}
    issues: list[ProcessIssues] = []
    argv: dict[str, list[str]] = {}
    ignored: dict[str, list[str]] = {}
    for proc in deployment.workers:
        flags = list(proc.argv[FLAGS_FROM:])
        argv[proc.name] = flags
        intent = topo.role(proc.role)
        if reference:
            assert sglang_table is not None
            ns, problem = _reference_flags(flags)
            parsed = _sglang_args(intent, sglang_table)
            problems = [*([ArgvProblem(None, problem)] if problem is not None else []), *parsed.problems]
            if problems:  # judged as the topology says; flags-parse reports the command
                issues.append(ProcessIssues(proc.name, tuple(problems), ()))
            if problem is not None:
                ns, _ = _reference_flags(_rendered_without_args(flags, intent.args))
            if ns is not None and _ignored_args(ns, parsed):
                ignored[proc.name] = _ignored_args(ns, parsed)
            if proc.role not in roles and ns is not None:
                roles[proc.role] = _reference_role(intent, ns, proc.env)
            continue
        assert table is not None
        parsed = parse_argv(flags, table)
        if parsed.problems or parsed.warnings:
            issues.append(ProcessIssues(proc.name, parsed.problems, parsed.warnings))
        if proc.role not in roles:
            roles[proc.role] = _sglang_role(intent, ServerSettings(parsed, dict(proc.env)))
    return Effective(version, table, roles, issues, argv, ignored)
