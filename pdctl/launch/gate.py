"""Preflight as the first step of a launch: the nodes are checked (and KV moved between them) before anything
starts; a failed check stops the launch with the node, the fact and the fix."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from pdctl.errors import CheckFailed

if TYPE_CHECKING:
    from pdctl.topology import Topology


def preflight_gate(
    topo: Topology,
    *,
    slurm: bool = False,
    on_report: Callable[[Any], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> bool | None:
    """Run preflight on TOPO's nodes; CheckFailed (exit 1, nothing started) if it fails. Returns its NVLink
    finding (prefill and decode nodes share one NVLink domain), which decides `transfer.nvlink: auto`."""
    from pdctl.preflight import run_preflight

    report = run_preflight(topo, slurm=slurm, progress=progress)
    if on_report is not None:
        on_report(report)
    if not report.ok:
        raise CheckFailed(report.summary() + "\nnot launching (--skip-preflight to launch anyway)")
    return report.nvlink_domain
