"""Assertions shared by launch tests: every process a run started is gone (by pid and process group)."""

from __future__ import annotations

import json
import os
from pathlib import Path

from pdctl.executors.local import group_members, proc_stat


def started_records(run_dir: Path) -> list[dict]:
    """Every process with a pid in the run's state.json (workers and router)."""
    state = json.loads((run_dir / "state.json").read_text())
    records = [r for r in state["processes"] if r.get("pid")]
    if state.get("router", {}).get("pid"):
        records.append(state["router"])
    return records


def live_pids(pids: set[int]) -> set[int]:
    """Those of PIDS that still run (zombies count as gone: they hold no resources but a table slot)."""
    alive = set()
    for pid in pids:
        stat = proc_stat(pid)
        if stat is not None and stat[0] != "Z":
            alive.add(pid)
    return alive


def group_pids(records: list[dict]) -> set[int]:
    """All live pids in the process groups of RECORDS (the servers and e.g. their rank workers)."""
    pids: set[int] = set()
    for record in records:
        pids |= set(group_members(int(record["pgid"])))
        pids.add(int(record["pid"]))
    return pids


def assert_no_orphans(run_dir: Path, extra_pids: set[int] = frozenset()) -> None:
    """No process of the run is left: not the recorded pids, nor anything in their groups."""
    records = started_records(run_dir)
    leftover = live_pids({int(r["pid"]) for r in records} | set(extra_pids))
    groups = {int(r["pgid"]): group_members(int(r["pgid"])) for r in records}
    assert not leftover, f"processes left behind: {leftover}"
    assert not any(groups.values()), f"process groups not empty: {groups}"


def pids_with(text: str) -> list[int]:
    """Live processes whose command line contains TEXT (not srun/salloc clients, not pytest), sorted."""
    pids = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmdline and not cmdline.startswith(("srun", "salloc")) and "-m pytest" not in cmdline:
                pids.append(int(entry))
    return sorted(pids)
