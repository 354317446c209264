"""The data types of check-compat: a Rule (id, severity, stage, check, fix) and the Finding it produces.

Rules are data so that the table, the docs and the tests enumerate the same list, and a new SGLang
restriction is one row plus one small pure function. Every rule names the stage at which SGLang fails without
it (pdctl/sglang/stages.py): what the mistake would cost if pdctl did not catch it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from pdctl.sglang.stages import check_stage

if TYPE_CHECKING:  # pragma: no cover
    from pdctl.compat.context import Context

Severity = Literal["error", "warning", "info"]
# The message of a PD-only rule on a colocated topology (listed, so the table still shows every rule).
NOT_APPLICABLE = "n/a: colocated topology"


@dataclass(frozen=True)
class Outcome:
    """What a check returns: `fired` = the rule's condition holds (an error, if the severity is error)."""

    fired: bool
    message: str


def passed(message: str) -> Outcome:
    """The condition does not hold; `message` says why the topology is fine on this point."""
    return Outcome(False, message)


def fired(message: str) -> Outcome:
    """The condition holds; `message` is what SGLang would say (its own wording where it has one)."""
    return Outcome(True, message)


@dataclass(frozen=True)
class Rule:
    """One compatibility rule (docs/check-compat.md says which SGLang behaviour each one mirrors).

    `stage`: where SGLang fails without this rule (a key of pdctl.sglang.stages.STAGES).
    `colocated` marks the rules that apply to a single plain (non-PD) server too: a `mode: colocated`
    topology runs only those, and lists the others as passing with NOT_APPLICABLE.
    `incident`: the public report of a field incident the rule catches (SGLang has no guard for it: the
    differential suite against SGLang's own code leaves these rules out of its verdict comparison).
    """

    id: str
    severity: Severity
    stage: str
    check: Callable[[Context], Outcome]
    fix: str
    summary: str
    colocated: bool = field(default=False, kw_only=True)
    incident: str | None = field(default=None, kw_only=True)

    def __post_init__(self) -> None:
        check_stage(self.stage)


def verdict(severity: str, ok: bool) -> str:
    """The table's word for a finding: pass, or FAIL / warn / note by severity (also for JSON findings)."""
    return "pass" if ok else {"error": "FAIL", "warning": "warn", "info": "note"}[severity]


@dataclass(frozen=True)
class Finding:
    """The verdict of one rule on one topology: `ok` is false when the rule fired."""

    rule: str
    severity: Severity
    ok: bool
    message: str
    fix: str | None
    stage: str

    @property
    def is_error(self) -> bool:
        """True for a failed error-severity finding, the only kind that makes a topology incompatible."""
        return self.severity == "error" and not self.ok

    @property
    def verdict(self) -> str:
        """pass / FAIL / warn / note, as the table shows it."""
        return verdict(self.severity, self.ok)

    def to_dict(self) -> dict[str, Any]:
        """The JSON shape CLI.md fixes (rule, severity, ok, message, fix) plus the failure stage."""
        return asdict(self)

    def compact(self) -> str:
        """One line to act on: 'rule (SGLang fails at: stage): message (fix: ...)'."""
        return compact_line(self.to_dict())


def compact_line(finding: dict[str, Any]) -> str:
    """A finding (its JSON form) as the one line check-compat ends with and launch refuses with:
    'rule (SGLang fails at: stage): message (fix: ...)'. One format for every place that lists failures."""
    fix = f" (fix: {finding['fix']})" if finding.get("fix") else ""
    return f"{finding['rule']} (SGLang fails at: {finding['stage']}): {finding['message']}{fix}"
