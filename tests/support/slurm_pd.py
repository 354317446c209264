"""A reference-engine PD topology on a real Slurm over namespaced hosts: the module fixture the Slurm e2e modules
share (tests/launch/test_slurm_multinode.py, tests/diagnose/test_e2e_slurm.py)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from tests.support.multihost import start_multihost
from tests.support.slurm_cluster import start_slurm


@contextmanager
def slurm_reference_pd(tmp: Path, checkpoint: Path, *, name: str, slurm: dict[str, Any], hosts: str, controller: str,
                       gpus: int, prefill_tp: int) -> Iterator[dict[str, Any]]:
    """Hosts HOSTS with sshd, Slurm (slurmctld on CONTROLLER, slurmds on a and b) and the topology NAME: prefill
    on node pa (a), decode TP1 on db (b), the router on pa; yields mh, slurm, env, tmp, topo; stops the hosts."""
    mh = start_multihost(tmp, hosts)
    try:
        cluster = start_slurm(mh.cluster, tmp / "slurm", controller=controller, nodes="ab")
        doc = {
            "name": name,
            "engine": {"kind": "reference", "python": mh.python},
            "model": {"path": str(checkpoint)},
            "slurm": slurm,
            "nodes": [{"name": "pa", "gpu": "cpu", "gpus": gpus}, {"name": "db", "gpu": "cpu", "gpus": gpus}],
            "transfer": {"backend": "nixl"},
            "server": {"page_size": 16},
            "prefill": {"nodes": ["pa"], "tp": prefill_tp, "port": 30000},
            "decode": {"nodes": ["db"], "tp": 1, "port": 30100},
            "router": {"node": "pa", "host": "0.0.0.0", "port": 8000},
        }
        topo = tmp / f"{name}.yaml"
        topo.write_text(yaml.safe_dump(doc, sort_keys=False))
        yield {"mh": mh, "slurm": cluster, "env": cluster.env(), "tmp": tmp, "topo": topo}
    finally:
        mh.stop()
