"""check-compat over a sweep: every variant judged before anything is submitted (srtctl cannot: it never looks
inside its sglang_config), one verdict per variant and one document for all.

The document is check-compat's (CLI.md) for the first valid variant, with `ok` true only when every variant
passes, `findings` folded over the variants (a rule fails when it fails in any variant, its message naming
them), and `variants`: [{name, overrides, ok, findings}]. A variant whose values make the topology invalid
input fails with the `topology` finding that says why.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pdctl.topology.model import Topology
from pdctl.topology.variants import SweepLoad

INVALID_RULE = "topology"
_MAX_NAMED = 3


def _invalid(error: str) -> dict[str, Any]:
    return {"rule": INVALID_RULE, "severity": "error", "ok": False, "message": error,
            "fix": "fix the sweep's value for this variant (or the topology it starts from)", "stage": "not rendered"}


def failed_rules(findings: list[dict[str, Any]]) -> list[str]:
    """The error rules that fail (what the variant table lists)."""
    return [f["rule"] for f in findings if f["severity"] == "error" and not f["ok"]]


def fold(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One finding per rule over every variant: failing where any variant fails (message: which, and the
    first one's words), passing with the first variant's message otherwise. Rules in the first variant's order."""
    order: list[str] = []
    by_rule: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for v in variants:
        for f in v["findings"]:
            if f["rule"] not in by_rule:
                order.append(f["rule"])
                by_rule[f["rule"]] = []
            by_rule[f["rule"]].append((v["name"], f))
    out: list[dict[str, Any]] = []
    for rule in order:
        seen = by_rule[rule]
        bad = [(name, f) for name, f in seen if not f["ok"]]
        first = (bad or seen)[0][1]
        doc = dict(first)
        if bad:
            names = ", ".join(name for name, _ in bad[:_MAX_NAMED]) + (f" and {len(bad) - _MAX_NAMED} more"
                                                                       if len(bad) > _MAX_NAMED else "")
            doc["message"] = f"fails in {len(bad)} of {len(variants)} variant(s) ({names}); {bad[0][0]}: {first['message']}"
        out.append(doc)
    return out


def sweep_report(load: SweepLoad, judge: Callable[[Topology], dict[str, Any]]) -> dict[str, Any]:
    """check-compat's document for every variant of LOAD; JUDGE: one topology -> its check-compat document."""
    variants: list[dict[str, Any]] = []
    base: dict[str, Any] | None = None
    for item in load.variants:
        entry: dict[str, Any] = {"name": item.variant.name, "overrides": dict(item.variant.values)}
        if item.topology is None:
            entry.update({"ok": False, "findings": [_invalid(item.error or "invalid")], "sglang": None})
        else:
            report = judge(item.topology)
            base = base or report
            entry.update({"ok": report["ok"], "findings": report["findings"], "sglang": report["sglang"]})
        variants.append(entry)
    assert base is not None  # load_sweep refuses a sweep without one valid variant
    doc = dict(base)
    doc.update({"ok": all(v["ok"] for v in variants), "findings": fold(variants), "sweep": load.sweep.to_json(),
                "variants": variants})
    return doc
