"""`pdctl restart` asks the process's kind whether it can restart it (pdctl.render.kinds.ProcessKind.restart):
a Slurm step is refused with the kind's reason before anything is signalled or started (local and ssh
processes are restarted for real in tests/launch/test_e2e_faults.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.launch.restart import restart
from pdctl.render.deployment import render
from pdctl.runs.state import new_record, write_deployment, write_state
from tests.support.topo_factory import make


def _run(tmp_path: Path, executor: str) -> Path:
    topo, _ = make(nodes=[{"name": "p0", "host": "gpu-01", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "gpu-02", "gpu": "h100", "gpus": 8}], router={"node": "p0"})
    deployment = render(topo, executor=executor)
    run_dir = tmp_path / executor
    write_deployment(run_dir, deployment)
    # started records whose pids are gone (the process group of pid 2**22 - 1 is nobody's here)
    records = [new_record(p, run_dir) | {"pid": 4194303, "pgid": 4194303} for p in deployment.processes()
               if p.role != "router"]
    router = new_record(deployment.router, run_dir) | {"pid": 4194303, "pgid": 4194303}
    write_state(run_dir, {"topology": topo.name, "run_dir": str(run_dir), "processes": records, "router": router})
    return run_dir


def test_a_slurm_step_is_refused_with_its_kinds_reason(tmp_path: Path) -> None:
    run_dir = _run(tmp_path, "slurm")
    with pytest.raises(UserError, match=r"prefill:0 runs as a Slurm step: pdctl restarts local and ssh processes "
                                        r"only; `pdctl down` and launch again"):
        restart(run_dir, "prefill:0")

