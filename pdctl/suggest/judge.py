"""pdctl's rules on a candidate: its topology built, rendered once and judged by check-compat, the failed rules
kept.

The one place `pdctl suggest` meets check-compat: the candidate's topology is rendered into the deployment a
launch would start (pdctl.render.deployment.render) and check-compat parses that deployment's commands, as it
does for `pdctl check-compat` and every launch.
"""

from __future__ import annotations

from typing import Any

from pdctl.compat import evaluate
from pdctl.errors import UserError
from pdctl.models.spec import ModelSpec
from pdctl.render.deployment import render
from pdctl.topology import Topology, build_topology

Problems = list[dict[str, str]]


def judge_topology(topo: Topology, spec: ModelSpec) -> tuple[Problems, Problems]:
    """(errors, warnings) of check-compat on TOPO's deployment, each {"rule", "message", "stage"}: what SGLang
    would reject (errors) and what it would run with a caveat (warnings)."""
    findings = evaluate(render(topo), spec)
    errors = [{"rule": f.rule, "message": f.message, "stage": f.stage} for f in findings if f.is_error]
    warnings = [{"rule": f.rule, "message": f.message, "stage": f.stage} for f in findings
                if f.severity == "warning" and not f.ok]
    return errors, warnings


def judge(data: dict[str, Any], spec: ModelSpec) -> tuple[Problems, Problems]:
    """judge_topology of the topology DATA; data that is not a valid topology is one error."""
    try:
        topo = build_topology(data, source="<suggest candidate>")
    except UserError as exc:
        return [{"rule": "topology", "message": exc.message, "stage": "argument parsing"}], []
    return judge_topology(topo, spec)
