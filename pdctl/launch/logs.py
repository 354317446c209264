"""`pdctl logs [ROLE[:N]]`: find a run's process logs and read them, wherever the process ran."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pdctl.errors import UserError
from pdctl.executors import executor_for
from pdctl.runs import read_state
from pdctl.runs.state import all_records

ROLES = ("prefill", "decode", "colocated", "router")


def select(records: list[dict[str, Any]], selector: str | None) -> list[dict[str, Any]]:
    """Records matching SELECTOR: None = all; 'prefill' = every prefill process; 'prefill:1' = replica 1
    (all its node ranks); a process name such as 'prefill-0-n1' = that one."""
    if selector is None:
        return records
    by_name = [r for r in records if r["name"] == selector]
    if by_name:
        return by_name
    role, _, replica = selector.partition(":")
    if role not in ROLES:
        names = ", ".join(r["name"] for r in records)
        raise UserError(
            f"unknown process {selector!r}: expected ROLE[:REPLICA] with ROLE one of "
            f"{', '.join(ROLES)}, or a process name ({names})"
        )
    chosen = [r for r in records if r["role"] == role]
    if replica:
        if not replica.isdigit():
            raise UserError(f"replica in {selector!r} must be a number")
        chosen = [r for r in chosen if int(r["replica"]) == int(replica)]
    if not chosen:
        raise UserError(f"no process matches {selector!r} in this run")
    return chosen


def records_of(run_dir: str | Path | None, selector: str | None) -> list[dict[str, Any]]:
    """The started processes of a run matching SELECTOR."""
    state = read_state(run_dir)
    records = all_records(state)
    if not records:
        raise UserError("this run has no started processes")
    return select(records, selector)


def read(record: dict[str, Any], tail: int) -> str:
    """The last TAIL lines of RECORD's log (fetched over ssh for remote processes)."""
    return executor_for(record).read_log(record, tail)


def follow(record: dict[str, Any], tail: int) -> Iterator[str]:
    """RECORD's log from its last TAIL lines on, as it grows (until interrupted)."""
    return executor_for(record).follow_log(record, tail)
