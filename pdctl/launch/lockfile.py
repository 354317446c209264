"""The run's lock.json as a launch writes it (pdctl.runs.lock): the version choice and preflight's facts per
node turned into the lock's plain data, written once the nodes were checked (passed or failed: a failed
preflight is recorded too, a node's SGLang that is not engine.version among its problems)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pdctl.runs.lock import build_lock, write_lock

if TYPE_CHECKING:
    from pdctl.preflight.report import PreflightReport
    from pdctl.render.spec import Deployment
    from pdctl.sglang.versions import VersionChoice


def record_lock(deployment: Deployment, run_dir: Path, version: VersionChoice | None,
                report: PreflightReport | None, *, preflight: str) -> Path:
    """Write RUN_DIR/lock.json for DEPLOYMENT (PREFLIGHT: passed | failed | skipped | in the job)."""
    sglang = None if version is None else {"asked": version.asked, "version": version.version,
                                           "table": version.table, "source": version.source, "note": version.note}
    nodes = None if report is None else {  # the probe's duration is how long it took, not what ran
        n.node: {"host": n.host, "roles": n.roles, **{k: v for k, v in n.facts.items() if k != "probe_s"}}
        for n in report.nodes}
    problems = [] if report is None else [
        {"node": n.node, **c.to_json()} for n in report.nodes for c in n.checks if not c.ok]
    return write_lock(run_dir, build_lock(deployment, sglang=sglang, nodes=nodes, problems=problems,
                                          preflight=preflight))
