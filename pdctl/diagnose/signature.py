"""One failure signature: a pattern over log lines, who says it, why it happens, what fixes it, and where the
words come from (the released code or binary that prints them, the public report that met them).

Signatures are data (pdctl/diagnose/kb_*.py); matching is `Signature.search` over one line. `blames` names the
role whose failure this one follows (a decode's waiting timeout follows a prefill that stopped sending): such a
finding is a consequence, and the diagnosis puts the blamed process's failure before it. `severity` "warning"
is shown but is not a failure on its own (SGLang retracting requests under KV pressure keeps serving).
`unexplained_only` marks an end that is news only when the log says nothing known (a process gone silently).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property

# the components a signature belongs to, in the order the docs list them
COMPONENTS = (
    "SGLang server", "SGLang PD transfer", "NIXL/UCX", "Mooncake", "sglang-router", "NCCL/torch.distributed",
    "CUDA", "OS", "process", "Slurm", "pyxis/enroot", "Kubernetes", "reference engine",
)
SEVERITIES = ("error", "warning")
# the SGLang wheels read for the release ranges (pip download --no-deps sglang==X; see kb_sglang.py)
OLDEST_READ, NEWEST_READ = "0.4.10", "0.5.23"


def words_pattern(message: Callable[..., str], arity: int) -> str:
    """A regular expression for MESSAGE's words (a function of ARITY values, e.g. pdctl/sglang/messages.py's), any
    values in their places: SGLang's words keep one source."""
    holes = [f"\0{i}\0" for i in range(arity)]
    pattern = re.escape(message(*holes))
    for hole in holes:
        pattern = pattern.replace(re.escape(hole), ".+?")
    return pattern


@dataclass(frozen=True)
class Signature:
    """A known failure: PATTERN (a regular expression searched in each log line) and what it means."""

    id: str
    component: str
    pattern: str
    cause: str  # one sentence
    fix: str  # a flag, an env, a topology change, a pdctl command
    source: str  # the file (or binary) of the released code that prints the words
    report: str | None = None  # the public report the signature comes from
    first: str | None = None  # SGLang's own words: the first release that prints them (None: every one read)
    fixed: str | None = None  # ... the first release that no longer does (None: still printed)
    # a consequence: the role it follows ("prefill", "decode", "worker", "rank"; "job": a Slurm run's job, whose
    # end its steps share; "any" other finding: the job whose launch failed)
    blames: str | None = None
    severity: str = "error"
    flags: int = field(default=0, compare=False)
    # an end that says only that the process is gone (its cause: "its log ends without a known error"): not a
    # finding of a process whose log names a known failure (that failure is why it is gone)
    unexplained_only: bool = False
    # a catch-all (SGLang's scheduler's "Scheduler hit an exception"): a finding only where no specific signature
    # matches the log (the specific words sit inside its traceback, after it)
    catch_all: bool = False

    @cached_property
    def regex(self) -> re.Pattern[str]:
        return re.compile(self.pattern, self.flags)

    def search(self, line: str) -> re.Match[str] | None:
        return self.regex.search(line)

    @property
    def releases(self) -> str:
        """The SGLang releases whose code prints the words, as read off the wheels ('' for words that are not
        SGLang's own)."""
        if not self.component.startswith("SGLang"):
            return ""
        if self.first is None and self.fixed is None:
            return f"every release read ({OLDEST_READ} to {NEWEST_READ})"
        if self.fixed is None:
            return f"SGLang >= {self.first}"
        return f"SGLang {self.first} ... before {self.fixed}" if self.first else f"SGLang before {self.fixed}"
