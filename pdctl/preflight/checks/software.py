"""Reachability, the engine's interpreter, and the versions that must agree (COMPAT: prefill and decode must run
the same SGLang; a reference-engine node must run the pdctl that launches it)."""

from __future__ import annotations

import sys
from typing import Any

from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.report import failed, passed

FIXES = {
    "unreachable": "check the node's host and ssh: settings (pdctl runs `ssh -o BatchMode=yes`), or that the "
                   "Slurm node is up",
    "python": "set engine.python to an interpreter that exists on every node (with the engine installed)",
    "arch": "point engine.python (or engine.container.image) at an interpreter built for the node's "
            "architecture; GB200/GB300 compute trays are aarch64 while login hosts are often x86_64",
    "timeout": "the node is reachable but slow to answer; retry, or raise --node-timeout",
    "probe": "run the engine python on the node by hand; its error is above",
}


def _engine_key(ctx: Context) -> str:
    return "pdctl" if ctx.topo.engine.kind == "reference" else "sglang"


def run(ctx: Context) -> list[NodeCheck]:
    out: list[NodeCheck] = []
    for name, facts in ctx.facts.items():
        out += _arch(name, facts)
        if not facts.ok:
            out.append((name, failed("reach", f"{facts.executor}: {facts.error}", found=facts.error_kind,
                                     fix=FIXES.get(facts.error_kind or "probe"))))
            continue
        host = ctx.fact(name, "hostname")
        out.append((name, passed("reach", f"{facts.executor} in {facts.seconds:.1f}s (hostname {host})", host)))
        py = ctx.fact(name, "python") or {}
        out.append((name, passed("python", f"{py.get('executable')} (Python {py.get('version')})",
                                 py.get("version"))))
    out += _packages(ctx)
    out += _same_versions(ctx)
    return out


def _arch(name: str, facts: Any) -> list[NodeCheck]:
    """The node's `uname -m`, and whether the interpreter the render runs there is built for it (a mismatch
    that did not run is the `reach` failure; one that ran is emulated: binfmt/qemu, slow and not what runs)."""
    arch = facts.arch
    if arch is None:
        return []
    built = f"{facts.python} is an {arch.binary} executable" if arch.binary else f"{facts.python} is not an ELF binary"
    if not arch.mismatch:
        return [(name, passed("arch", f"{arch.machine} (uname -m); {built}", arch.machine))]
    if not facts.ok:
        return [(name, failed("arch", f"{arch.machine} (uname -m), but {built}: it cannot run there",
                              found=arch.binary, expected=arch.machine, fix=FIXES["arch"]))]
    return [(name, failed("arch", f"{arch.machine} (uname -m), but {built}: it ran under emulation", found=arch.binary,
                          expected=arch.machine, severity="warning", fix=FIXES["arch"]))]


def _packages(ctx: Context) -> list[NodeCheck]:
    topo = ctx.topo
    out: list[NodeCheck] = []
    engine = _engine_key(ctx)
    backend = topo.transfer.backend if topo.is_pd else None
    for name in ctx.servers():
        pkgs = ctx.fact(name, "packages") or {}
        python = ctx.facts[name].python
        found = pkgs.get(engine)
        if found is None:
            out.append((name, failed(f"versions.{engine}", f"{engine} is not importable by {python}",
                                     expected=topo.engine.version or ctx.controller_pdctl,
                                     fix=f"install {engine} for {python} on this node, or point engine.python at "
                                         "the environment that has it")))
        elif engine == "sglang" and topo.engine.version and found != topo.engine.version:
            out.append((name, failed("versions.sglang", f"sglang {found}, but the topology says engine.version "
                                     f"{topo.engine.version}", found=found, expected=topo.engine.version,
                                     fix=f"install sglang=={topo.engine.version} on this node, or fix "
                                         "engine.version (check-compat's version rules used it)")))
        elif engine == "pdctl" and found != ctx.controller_pdctl:
            out.append((name, failed("versions.pdctl", f"pdctl {found} in {python}, but the launching pdctl is "
                                     f"{ctx.controller_pdctl}", found=found, expected=ctx.controller_pdctl,
                                     fix="install the same pdctl on every node (the reference engine is pdctl)")))
        else:
            out.append((name, passed(f"versions.{engine}", f"{engine} {found}", found)))
        for lib in ([backend] if backend else []) + ["torch"]:
            version = pkgs.get(lib)
            if version is None:
                out.append((name, failed(f"versions.{lib}", f"{lib} is not installed for {python}",
                                         fix=f"install {lib} in the engine's environment on this node")))
            else:
                out.append((name, passed(f"versions.{lib}", f"{lib} {version}", version)))
    router = topo.router_node.name
    if ctx.deployment.router.argv[0] == sys.executable:
        # the router runs with this very interpreter (a node that is this machine, and its servers run another
        # one: SGLang's side venv on a CPU node): what this interpreter has is the fact
        out.append((router, _this_router()))
    elif ctx.reached(router):
        version = (ctx.fact(router, "packages") or {}).get("sglang_router")
        check = passed("versions.sglang_router", f"sglang-router {version}", version) if version else failed(
            "versions.sglang_router", f"sglang-router is not installed for {ctx.facts[router].python}",
            fix="pip install sglang-router on the router node")
        out.append((router, check))
    return out


def _this_router() -> Any:
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("sglang-router")
    except PackageNotFoundError:
        return failed("versions.sglang_router", f"sglang-router is not installed for {sys.executable}",
                      fix="pip install sglang-router (pdctl's engine extra)")
    return passed("versions.sglang_router", f"sglang-router {found}", found)


def _same_versions(ctx: Context) -> list[NodeCheck]:
    """Every server node runs the same engine and transfer library versions (the first prefill node's)."""
    nodes = ctx.servers()
    if len(nodes) < 2:
        return []
    out: list[NodeCheck] = []
    keys = [_engine_key(ctx)] + ([ctx.topo.transfer.backend] if ctx.topo.is_pd else [])
    ref = nodes[0]
    for key in keys:
        want = (ctx.fact(ref, "packages") or {}).get(key)
        for name in nodes[1:]:
            have = (ctx.fact(name, "packages") or {}).get(key)
            if have != want and have is not None and want is not None:
                out.append((name, failed(f"versions.same.{key}", f"{key} {have} here but {want} on node {ref}: "
                                         "prefill and decode must run the same version", found=have,
                                         expected=want, fix=f"install {key} {want} on node {name} (or the other "
                                         "way round) so that every node runs one version")))
    return out
