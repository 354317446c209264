"""The first failure in one process's log lines (pure): the first line a known signature matches, else (for a
process that failed) the lines around the first error or traceback, reported as having no known cause."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from pdctl.diagnose.signature import Signature

# 2026-12-03 10:30:00[,.123] (SGLang, the router, Python logging) and glog's E0423 16:34:48.911491 (Mooncake,
# no year: read as this year)
ISO_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}:\d{2})")
GLOG_TIME = re.compile(r"^[IWEF](\d{2})(\d{2}) (\d{2}:\d{2}:\d{2})")
# slurmstepd's "*** JOB 12 ON node CANCELLED AT 2026-12-04T15:49:20 DUE TO ..." (its time is in the message)
SLURM_TIME = re.compile(r"CANCELLED AT (\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2})")
# what marks an error line in any of the components' logs (used only to show context, never as a cause)
ERROR_MARK = re.compile(r"Traceback \(most recent call last\)|\b(ERROR|FATAL|CRITICAL)\b|\w+(Error|Exception):"
                        r"|\berror:|\bfailed\b", re.IGNORECASE)
CONTEXT_BEFORE, CONTEXT_AFTER, TAIL_WHEN_NO_MARK = 3, 12, 15
# the line a Python traceback ends with: the exception raised ("IndexError: index 3280 is out of bounds ...")
RAISED = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Interrupt|Exit)\b")
TRACEBACK_SCAN = 400  # lines searched for a traceback's end


def raised_after(lines: Sequence[str], start: int) -> int | None:
    """The index of the exception line ending the traceback that starts at line START, if one follows."""
    for i in range(start + 1, min(len(lines), start + TRACEBACK_SCAN)):
        if RAISED.match(lines[i]):
            return i
    return None


@dataclass(frozen=True)
class Hit:
    """The first line of a log a signature matches."""

    signature: Signature
    line_no: int  # 0-based in the lines read
    line: str
    time: datetime | None


def line_time(line: str, year: int | None = None) -> datetime | None:
    """The timestamp a log line starts with (or holds), when it has one."""
    m = ISO_TIME.search(line[:80]) or SLURM_TIME.search(line)
    if m:
        try:
            return datetime.fromisoformat(f"{m.group(1)} {m.group(2)}")
        except ValueError:
            return None
    m = GLOG_TIME.match(line)
    if m:
        try:
            return datetime.fromisoformat(f"{year or datetime.now().year}-{m.group(1)}-{m.group(2)} {m.group(3)}")
        except ValueError:
            return None
    return None


def time_near(lines: Sequence[str], index: int) -> datetime | None:
    """The timestamp of line INDEX, else of the closest line before it that has one (a traceback's lines have
    none: the line that logged it does)."""
    for i in range(index, -1, -1):
        t = line_time(lines[i])
        if t is not None:
            return t
    return None


def first_hit(lines: Sequence[str], catalogue: Sequence[Signature]) -> Hit | None:
    """The first line (in log order) that a signature of CATALOGUE matches; at one line, the first signature
    of the catalogue wins (specific ones are listed before generic ones). Catch-all signatures count only when
    no other matches anywhere in LINES."""
    for group in ([s for s in catalogue if not s.catch_all], [s for s in catalogue if s.catch_all]):
        for i, line in enumerate(lines):
            for sig in group:
                if sig.search(line):
                    return Hit(sig, i, line, time_near(lines, i))
    return None


def error_context(lines: Sequence[str]) -> tuple[int | None, list[str]]:
    """(index of the first error or traceback line, the lines around it); without one, (None, the last lines)."""
    for i, line in enumerate(lines):
        if ERROR_MARK.search(line):
            return i, list(lines[max(0, i - CONTEXT_BEFORE): i + CONTEXT_AFTER + 1])
    return None, list(lines[-TAIL_WHEN_NO_MARK:])
