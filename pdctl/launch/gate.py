"""What every launch path passes before anything starts: the SGLang version (before the render), then the
verdicts over the rendered deployment: check-compat, local nodes, and (for a real launch) preflight of the
nodes themselves.

`pdctl launch`, `--dry-run` and the Slurm render all go through here (pdctl.launch.deploy), so none of them
can start (or print a script for) a topology check-compat rejects. The version that judges the commands comes
from engine.version, else from the nodes themselves (their engine.python is asked which SGLang it has,
through the executor that would start the servers), else it is assumed and said so. `--skip-compat` skips
the verdict, not the look: it reports what check-compat would have refused.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pdctl.compat import Finding, evaluate
from pdctl.errors import CheckFailed, UserError
from pdctl.executors import node_executor, node_kind
from pdctl.extras import missing_for_process
from pdctl.models import resolve_model_spec
from pdctl.preflight.report import PreflightReport
from pdctl.preflight.runner import run_preflight
from pdctl.render.hosts import is_local_host
from pdctl.render.kinds import process_kind
from pdctl.render.transfer import with_nvlink
from pdctl.sglang.versions import VersionChoice, choose, parse_version
from pdctl.sglang_cpu import SERVE_MODULE
from pdctl.sglang_cpu.sidevenv import require_server_env

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment
    from pdctl.topology import Node, Topology

ASK_TIMEOUT_S = 60.0
# importlib.metadata reads the installed version without importing SGLang (which would initialise CUDA,
# and takes tens of seconds); same answer as `python -c "import sglang; print(sglang.__version__)"`.
ASK_VERSION = ["-c", "import importlib.metadata as m; print(m.version('sglang'))"]


@dataclass(frozen=True)
class NodeAnswer:
    """One node's answer to 'which SGLang do you have?' (version None: it could not say; `why` says why)."""

    node: str
    version: str | None
    why: str = ""


def askable(topo: Topology, node: Node, *, executor: str = "local") -> bool:
    """Nodes pdctl can run a command on, as EXECUTOR's kind says (pdctl.executors.NODE_EXECUTORS): Slurm nodes
    that name their host (through srun), ssh nodes, and nodes without ssh that are this machine."""
    return node_kind(executor).askable(node)


def ask_node(topo: Topology, node: Node, *, executor: str = "local") -> NodeAnswer:
    """Run engine.python on NODE (through its executor, in the engine's container) to read the installed
    SGLang version."""
    argv = [topo.engine.python, *ASK_VERSION]
    done = node_executor(node, kind=executor, topo=topo).run(argv, timeout=ASK_TIMEOUT_S, env=dict(topo.engine.env))
    out = done.stdout.strip().splitlines()
    if done.returncode == 0 and out and parse_version(out[-1]) is not None:
        return NodeAnswer(node.name, out[-1].strip())
    if done.returncode is None:
        return NodeAnswer(node.name, None, f"no answer within {ASK_TIMEOUT_S:.0f}s")
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["(no output)"]
    return NodeAnswer(node.name, None, f"{topo.engine.python} exited {done.returncode}: {tail[0]}")


def engine_version(topo: Topology, *, ask: bool, strict: bool,
                   executor: str = "local") -> tuple[Topology, VersionChoice | None]:
    """The topology with engine.version filled from the nodes when it was missing, and the version choice.

    ASK: query the nodes that can be reached (a real launch; a dry run of local/ssh nodes). STRICT: a node
    that cannot say (no SGLang for engine.python) is an error (a launch would fail there); otherwise the
    version is assumed and the choice's note says why. Nodes that disagree are always an error. EXECUTOR: the
    kind that reaches the nodes (pdctl.render.kinds)."""
    if topo.engine.kind != "sglang":
        return topo, None
    if topo.engine.version or not ask:
        return topo, choose(topo.engine.version)
    names = list(dict.fromkeys(n for r in topo.roles() for n in r.nodes))
    nodes = [topo.node(n) for n in names if askable(topo, topo.node(n), executor=executor)]
    answers = [ask_node(topo, n, executor=executor) for n in nodes]
    bad = [a for a in answers if a.version is None]
    if bad and strict:
        raise CheckFailed(
            "cannot read the SGLang version on " + ", ".join(f"node {a.node} ({a.why})" for a in bad),
            detail="install SGLang for engine.python on those nodes, or set engine.version",
        )
    versions = sorted({a.version for a in answers if a.version})
    if len(versions) > 1:
        said = ", ".join(f"{a.node}: {a.version}" for a in answers if a.version)
        raise CheckFailed(f"the nodes run different SGLang versions ({said}); prefill and decode must run one")
    if not versions:
        choice = choose(None)
        why = "; ".join(f"node {a.node}: {a.why}" for a in bad) or "no node could be asked"
        return topo, VersionChoice(None, choice.version, choice.table, "assumed",
                                   f"{why}: assuming SGLang {choice.version}")
    asked = choose(versions[0], source="nodes")
    engine = topo.engine.model_copy(update={"version": versions[0]})
    return topo.model_copy(update={"engine": engine}), asked


def compat_findings(deployment: Deployment, version: VersionChoice | None) -> list[Finding]:
    """check-compat's findings over DEPLOYMENT's commands, judged as VERSION."""
    topo = deployment.topo
    spec = resolve_model_spec(topo.model, engine_kind=topo.engine.kind)
    return evaluate(deployment, spec, version)


def _lines(errors: list[Finding]) -> str:
    return "\n".join(f"- {f.compact()}" for f in errors)


def check_compat(deployment: Deployment, version: VersionChoice | None = None) -> list[Finding]:
    """Run check-compat; raise CheckFailed listing the errors (nothing starts that SGLang would reject)."""
    findings = compat_findings(deployment, version)
    errors = [f for f in findings if f.is_error]
    if errors:
        raise CheckFailed(
            f"topology {deployment.topology} is not compatible ({len(errors)} error(s)); not launching or "
            "rendering (--skip-compat to override)",
            detail=_lines(errors),
        )
    return findings


def skipped_compat(deployment: Deployment, version: VersionChoice | None = None) -> str:
    """The loud notice of --skip-compat: what check-compat would have refused (or that it found nothing)."""
    head = f"--skip-compat: check-compat's verdict is NOT enforced for {deployment.topology}"
    try:
        errors = [f for f in compat_findings(deployment, version) if f.is_error]
    except UserError as exc:
        return f"{head}; check-compat could not even run: {exc.message}"
    if not errors:
        return f"{head}; it would have passed"
    return f"{head}; it would have REFUSED it ({len(errors)} error(s)); going ahead anyway:\n{_lines(errors)}"


def require_local_nodes(deployment: Deployment) -> None:
    """Processes on nodes without `ssh:` start here: their host must be this machine (before anything starts)."""
    remote = sorted({(p.node, p.host) for p in deployment.processes()
                     if process_kind(p).here and not is_local_host(p.host)})
    if remote:
        names = ", ".join(f"{n} ({h})" for n, h in remote)
        raise UserError(f"node(s) {names} have no ssh: and are not this machine: the local executor cannot start "
                        "processes there; add ssh: to those nodes, or use --executor slurm")


def missing_here(deployment: Deployment) -> list[UserError]:
    """pdctl's own processes that would start on this machine with this interpreter (the router, reference
    workers) but cannot: this install lacks an extra they import (a CLI-only `pip install pdctl`). One error
    per process, each naming the extra to install."""
    found = [missing_for_process(p.argv, f"{p.name} (started on this machine)")
             for p in deployment.processes() if process_kind(p).here]
    found += [missing_cpu_server(p.argv, deployment.topo.transfer.backend if p.role != "colocated" else None,
                                 p.name) for p in deployment.workers if process_kind(p).here]
    return [error for error in found if error is not None]


def missing_cpu_server(argv: list[str], backend: str | None, name: str) -> UserError | None:
    """For a CPU node's SGLang server (`PYTHON -m pdctl.sglang_cpu.serve ...`) started here: the UserError naming
    what its interpreter lacks and `make sglang-env`; None when it has everything (or is not such a server)."""
    if argv[1:3] != ["-m", SERVE_MODULE]:
        return None
    try:
        require_server_env(argv[0], backend, what=f"{name} (SGLang's server on a CPU node)")
    except UserError as exc:
        return exc
    return None


def require_runnable_here(deployment: Deployment) -> None:
    """Before anything starts: the first of missing_here(DEPLOYMENT) as bad input (exit 2)."""
    missing = missing_here(deployment)
    if missing:
        raise missing[0]


def gate(deployment: Deployment, version: VersionChoice | None, *, skip_compat: bool, warn: Any = None,
         notice: Any = None) -> None:
    """check-compat over DEPLOYMENT (or, with SKIP_COMPAT, the loud notice through WARN): the verdict every
    launch path passes once, after the one render. NOTICE receives each warning check-compat raised (a flag the
    reference engine ignores, a deprecated flag, ...) as one compact line."""
    if skip_compat:
        if warn is not None:
            warn(skipped_compat(deployment, version))
    else:
        for finding in check_compat(deployment, version):
            if notice is not None and finding.severity == "warning" and not finding.ok:
                notice(finding.compact())


def preflight_gate(
    deployment: Deployment,
    *,
    on_report: Callable[[PreflightReport], None] | None = None,
    progress: Callable[[str], None] | None = None,
    shared_dir: Path | None = None,
) -> Deployment:
    """Run preflight on DEPLOYMENT's nodes; CheckFailed (exit 1, nothing started) if it fails. Returns the
    deployment with `transfer.nvlink: auto` decided by preflight's NVLink finding (prefill and decode nodes
    in one NVLink domain): its environment adjusted, nothing rendered again. SHARED_DIR: the run dir every
    node must share with this machine (a Slurm launch)."""
    report = run_preflight(deployment, progress=progress, shared_dir=shared_dir)
    if on_report is not None:
        on_report(report)
    if not report.ok:
        raise CheckFailed(report.summary() + "\nnot launching (--skip-preflight to launch anyway)")
    return with_nvlink(deployment, report.nvlink_domain)
