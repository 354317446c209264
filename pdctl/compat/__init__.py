"""check-compat: SGLang 0.5.23's PD restrictions as data (RULES) plus small pure checks over a topology."""

from pdctl.compat.evaluate import compat_report, evaluate, is_compatible
from pdctl.compat.findings import Finding, Rule
from pdctl.compat.table import RULES, RULES_BY_ID

__all__ = ["RULES", "RULES_BY_ID", "Finding", "Rule", "compat_report", "evaluate", "is_compatible"]
