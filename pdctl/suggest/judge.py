"""pdctl's rules on a candidate: its topology built and judged by check-compat, the failed rules kept.

The one place `pdctl suggest` meets check-compat (build the topology from data, evaluate it): when check-compat
moves to judging a rendered deployment object, only this module changes.
"""

from __future__ import annotations

from typing import Any

from pdctl.errors import UserError
from pdctl.models.spec import ModelSpec

Problems = list[dict[str, str]]


def judge_topology(topo: Any, spec: ModelSpec) -> tuple[Problems, Problems]:
    """(errors, warnings) of check-compat on TOPO, each {"rule", "message", "stage"}: what SGLang would reject
    (errors) and what it would run with a caveat (warnings)."""
    from pdctl.compat import evaluate

    findings = evaluate(topo, spec)
    errors = [{"rule": f.rule, "message": f.message, "stage": f.stage} for f in findings if f.is_error]
    warnings = [{"rule": f.rule, "message": f.message, "stage": f.stage} for f in findings
                if f.severity == "warning" and not f.ok]
    return errors, warnings


def judge(data: dict[str, Any], spec: ModelSpec) -> tuple[Problems, Problems]:
    """judge_topology of the topology DATA; data that is not a valid topology is one error."""
    from pdctl.topology import build_topology

    try:
        topo = build_topology(data, source="<suggest candidate>")
    except UserError as exc:
        return [{"rule": "topology", "message": exc.message, "stage": "argument parsing"}], []
    return judge_topology(topo, spec)
