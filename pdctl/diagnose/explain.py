"""From each process's first failure to a diagnosis (pure): order the failures in time across processes and
put the root cause first. A failure whose signature blames a role (decode's waiting timeout blames prefill)
follows the earliest failure of a process of that role, and says so ("decode-0's sglang-waiting-timeout
follows prefill-0's stopped"); an unknown failure is shown with the lines around its first error and "no
known cause", never a guess."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pdctl.diagnose import CATALOGUE
from pdctl.diagnose.match import Hit, error_context, first_hit, raised_after, time_near
from pdctl.diagnose.signature import Signature

NO_KNOWN_CAUSE = "no known cause"
WORKER_ROLES = ("prefill", "decode", "colocated")


@dataclass
class ProcessLog:
    """What diagnose reads of one process: its log lines, pdctl's status lines about its end or state
    (kb_platform.EXIT_LINE ...), and whether it ended or hangs (a process that failed without a known signature
    is an unknown failure)."""

    name: str
    role: str
    replica: int
    node: str
    lines: list[str]
    status: list[str] = field(default_factory=list)
    failed: bool = False
    # the components whose signatures its log lines are read for (None: all): a Slurm job's output holds the
    # processes' log tails that pdctl's launch in it printed, whose failures are those processes' findings
    components: tuple[str, ...] | None = None


@dataclass
class Finding:
    """One process's first failure."""

    process: str
    role: str
    replica: int
    node: str
    signature: Signature | None  # None: no known cause
    line: str | None
    time: datetime | None
    context: list[str] = field(default_factory=list)
    follows: str | None = None  # the process whose failure explains this one
    explanation: str = ""
    end: bool = False  # the process's end or state (exited, stopped, hung), not a line of its log

    @property
    def what(self) -> str:
        return self.signature.id if self.signature else "unknown failure"

    @property
    def is_failure(self) -> bool:
        return self.signature is None or self.signature.severity == "error"

    def to_json(self) -> dict[str, Any]:
        sig = self.signature
        return {
            "process": self.process, "role": self.role, "replica": self.replica, "node": self.node,
            "signature": sig.id if sig else None, "component": sig.component if sig else None,
            "cause": sig.cause if sig else NO_KNOWN_CAUSE, "fix": sig.fix if sig else None,
            "source": sig.source if sig else None, "report": sig.report if sig else None,
            "releases": (sig.releases or None) if sig else None, "severity": sig.severity if sig else "error",
            "line": self.line, "time": self.time.isoformat() if self.time else None,
            "context": self.context, "follows": self.follows, "explanation": self.explanation or None,
            "end": self.end,
        }


@dataclass
class Diagnosis:
    """The findings of one run, root cause first."""

    findings: list[Finding]
    checked: int

    @property
    def failed(self) -> bool:
        return any(f.is_failure for f in self.findings)

    @property
    def root(self) -> Finding | None:
        return next((f for f in self.findings if f.is_failure), None)

    def to_json(self) -> dict[str, Any]:
        return {"failed": self.failed, "checked": self.checked, "findings": [f.to_json() for f in self.findings]}

    def summary(self) -> str:
        """The diagnosis in a few lines (what a failing command's message ends with)."""
        if not self.findings:
            return f"diagnosis: no known failure in the logs of the {self.checked} processes"
        out = []
        for n, f in enumerate(self.findings, 1):
            head = f"{n}. {f.process}: {f.what}"
            if f.signature is None:
                out.append(f"{head}: {NO_KNOWN_CAUSE}; its first error:\n" + "\n".join(f"     {c}" for c in f.context))
                continue
            out.append(f"{head} ({f.signature.component}): {f.signature.cause}"
                       + (f"; {f.explanation}" if f.explanation else f"; fix: {f.signature.fix}"))
        return "diagnosis (root cause first):\n" + "\n".join(out)


def findings_of(log: ProcessLog, catalogue: Sequence[Signature] = CATALOGUE) -> list[Finding]:
    """LOG's first failure in its log (a known signature's first line) and, when the process ended or hangs, that
    end (a stopped prefill that logged an error earlier has both); a failed process with neither known is an
    unknown failure, shown with the lines around its first error."""
    base = {"process": log.name, "role": log.role, "replica": log.replica, "node": log.node}
    out = []
    own = [s for s in catalogue if s.component in log.components] if log.components else catalogue
    hit: Hit | None = first_hit(log.lines, own)
    if hit is not None:
        lo = max(0, hit.line_no - 2)
        context = log.lines[lo: hit.line_no + 3]
        raised = raised_after(log.lines, hit.line_no) if "Traceback (most recent call last)" in hit.line else None
        if raised is not None and raised >= hit.line_no + 3:  # the exception the traceback ends with says what
            context = [*context, "...", *log.lines[max(hit.line_no + 3, raised - 2): raised + 1]]
        out.append(Finding(**base, signature=hit.signature, line=hit.line.strip(), time=hit.time, context=context))
    ended = first_hit(log.status, catalogue)
    if ended is not None and hit is not None and ended.signature is hit.signature:
        # an end its log already names (Slurm's record of the time limit its output printed): that finding,
        # with the record as evidence
        out[0].context.append(ended.line)
    elif ended is not None and not (hit is not None and ended.signature.unexplained_only):
        context = [] if hit is not None else error_context(log.lines)[1]  # the log's first error says more
        out.append(Finding(**base, signature=ended.signature, line=ended.line, time=None, context=context,
                           end=True))
    if out or not log.failed:
        return out
    index, context = error_context(log.lines)
    return [Finding(**base, signature=None, line=log.lines[index].strip() if index is not None else None,
                    time=time_near(log.lines, index) if index is not None else None, context=context + log.status,
                    end=True)]


def _blamed(finding: Finding, other: Finding) -> bool:
    """Whether OTHER's process is of the role FINDING's signature blames."""
    blames = finding.signature.blames if finding.signature else None
    if other is finding or not other.is_failure or blames is None:
        return False
    if blames == "any":  # a whole that fails when any part does (a Slurm job whose launch failed)
        return True
    if blames == "worker":
        return other.role in WORKER_ROLES
    if blames == "rank":  # a collective's timeout: another rank (process) of the same server
        return (other.role, other.replica) == (finding.role, finding.replica)
    return other.role == blames


def _when(f: Finding) -> tuple[int, datetime]:
    return (0, f.time) if f.time is not None else (1, datetime.max)


def explain(logs: Sequence[ProcessLog], catalogue: Sequence[Signature] = CATALOGUE) -> Diagnosis:
    """Every process's first failure (and its end), root causes first: those that explain another, then the
    other roots, in time order; then the failures they explain. A consequence follows a failure of the role it
    blames: that process's end (it stopped, died, hangs) before anything it logged, else the earliest one."""
    found = [f for log in logs for f in findings_of(log, catalogue)]
    explaining: set[int] = set()
    for f in found:
        blamed = [o for o in found if _blamed(f, o)]
        roots = [o for o in blamed if not (o.signature and o.signature.blames)]
        # a whole that failed because a part did ("any": the job) explains none of its parts
        chained = [o for o in blamed if not (o.signature and o.signature.blames == "any")]
        causes = sorted(roots or chained, key=lambda o: (not o.end, _when(o)))
        if causes:
            cause = causes[0]
            explaining.add(id(cause))
            f.follows = cause.process
            f.explanation = f"{f.process}'s {f.what} follows {cause.process}'s {cause.what}"
    roots = sorted((f for f in found if f.follows is None),
                   key=lambda f: (not f.is_failure, id(f) not in explaining, _when(f)))
    rest = sorted((f for f in found if f.follows is not None), key=_when)
    return Diagnosis(findings=roots + rest, checked=len(logs))
