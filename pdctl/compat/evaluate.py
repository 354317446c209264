"""Run every rule over a rendered deployment and assemble the check-compat report (CLI.md's JSON document).

The pipeline: rendered deployment (what launch starts; pdctl.render) -> its commands parsed with the SGLang
version's flag table -> effective settings per role -> rules (pdctl/compat/effective.py). `evaluate` returns one finding per
rule — passing ones too — so the table and JSON always list every rule and a reader can see what was checked,
not only what failed. On a colocated (non-PD) topology the PD-only rules are listed as passing with
"n/a: colocated topology", and there is no head map or transfer plan.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pdctl.compat.context import Context
from pdctl.compat.effective import Effective, effective
from pdctl.compat.findings import NOT_APPLICABLE, Finding
from pdctl.compat.table import RULES
from pdctl.models.spec import ModelSpec
from pdctl.plan.heads import ownership_map, ratio_ok
from pdctl.plan.transfer import transfer_plan
from pdctl.sglang.versions import VersionChoice

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment


def judge(deployment: Deployment, spec: ModelSpec, eff: Effective) -> list[Finding]:
    """One Finding per rule over already-built effective settings, in table order."""
    ctx = Context(deployment.topo, spec, eff, deployment.placements)
    findings: list[Finding] = []
    for rule in RULES:
        if ctx.colocated and not rule.colocated:
            findings.append(Finding(rule.id, rule.severity, True, NOT_APPLICABLE, None, rule.stage))
            continue
        outcome = rule.check(ctx)
        findings.append(Finding(rule.id, rule.severity, not outcome.fired, outcome.message,
                                rule.fix if outcome.fired else None, rule.stage))
    return findings


def evaluate(deployment: Deployment, spec: ModelSpec, version: VersionChoice | None = None) -> list[Finding]:
    """One Finding per rule over DEPLOYMENT (rendered by pdctl.render), in table order; `ok` false where the
    rule fired. VERSION: the SGLang version judged (default: engine.version, else pdctl's default version,
    said so in the report)."""
    return judge(deployment, spec, effective(deployment, version))


def is_compatible(findings: list[Finding]) -> bool:
    """False iff some error-severity finding failed (CLI.md's definition of `ok`)."""
    return not any(f.is_error for f in findings)


def attn_tp_info(topo: Any, eff: Effective) -> dict[str, dict[str, int | bool]]:
    """Attention TP per role with the numbers it is derived from (as the rendered commands set them)."""
    roles = eff.roles
    return {
        r.name: {"tp": roles[r.name].tp, "dp": r.dp, "enable_dp_attention": roles[r.name].enable_dp_attention,
                 "pp": roles[r.name].pp, "attn_tp": roles[r.name].attn_tp}
        for r in topo.roles()
    }


def heads_and_transfer(
    topo: Any, spec: ModelSpec, tokens: int, prefix_len: int, eff: Effective
) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """The KV head ownership map and the transfer plan of one request, as JSON-ready data, for the roles as
    the rendered commands run them (EFF).

    Only computable when the attention TP sizes map onto each other; otherwise ([], None), and the
    attn-tp-ratio finding says why. A colocated topology has neither (no transfer).
    """
    if getattr(topo, "mode", "pd") != "pd":
        return [], None
    pre, dec = eff.roles["prefill"], eff.roles["decode"]
    if not ratio_ok(pre.attn_tp, dec.attn_tp) or pre.page_size is None:
        return [], None
    heads = ownership_map(pre.attn_tp, dec.attn_tp, 1 if spec.mla else spec.num_kv_heads)
    return heads, transfer_plan(topo, spec, tokens, prefix_len, roles=(pre, dec)).to_dict()


def version_info(topo: Any, eff: Effective) -> dict[str, Any]:
    """Which engine and SGLang version judged the commands (JSON `sglang`): asked, used, table, source."""
    if topo.engine.kind != "sglang":
        return {"engine": topo.engine.kind, "version": None, "table": None, "source": "reference engine",
                "note": None, "asked": None}
    return {"engine": "sglang", **eff.version.to_dict()}


def compat_report(deployment: Deployment, spec: ModelSpec, tokens: int = 8192,
                  version: VersionChoice | None = None) -> dict[str, Any]:
    """The whole check-compat document of DEPLOYMENT: verdict, model spec, the version judged, findings (with
    the stage each rule's failure would hit), head map, attn TP, transfer plan (the last two empty / null
    where `heads_and_transfer` cannot compute them)."""
    topo = deployment.topo
    eff = effective(deployment, version)
    findings = judge(deployment, spec, eff)
    heads, transfer = heads_and_transfer(topo, spec, tokens, 0, eff)
    return {
        "ok": is_compatible(findings),
        "topology": topo.name,
        "mode": getattr(topo, "mode", "pd"),
        "source": str(topo.source_path) if getattr(topo, "source_path", None) else None,
        "sglang": version_info(topo, eff),
        "model": spec.to_dict(),
        "findings": [f.to_dict() for f in findings],
        "heads": heads,
        "attn_tp": attn_tp_info(topo, eff),
        "transfer": transfer,
    }


def plan_report(deployment: Deployment, spec: ModelSpec, tokens: int, prefix_len: int = 0, *,
                force: bool = False) -> dict[str, Any]:
    """`pdctl plan`'s document: the verdict and failed findings first; the head map and transfer plan only
    for a compatible topology (or with FORCE), so nobody reads a plan of something SGLang will not run."""
    topo = deployment.topo
    eff = effective(deployment)
    findings = judge(deployment, spec, eff)
    doc: dict[str, Any] = {
        "ok": is_compatible(findings), "topology": topo.name, "sglang": version_info(topo, eff),
        "model": spec.to_dict(), "findings": [f.to_dict() for f in findings if f.is_error],
    }
    if doc["ok"] or force:
        heads, transfer = heads_and_transfer(topo, spec, tokens, prefix_len, eff)
        doc.update({"attn_tp": attn_tp_info(topo, eff), "heads": heads, "transfer": transfer})
    return doc
