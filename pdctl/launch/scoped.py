"""A deployment that lives for one block: launched from a topology file into a temporary run dir, torn down
afterwards whatever happens in between (parity's --reference-topology, bench serve's --control-topology)."""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pdctl.launch.deploy import launch_topology
from pdctl.launch.shutdown import teardown
from pdctl.runs import STATE_FILE
from pdctl.target import Target, target_from_state
from pdctl.topology import load_topology


@contextlib.contextmanager
def launched_reference(topology_file: str | Path, *, timeout: float = 600.0) -> Iterator[Target]:
    """Launch the deployment of TOPOLOGY_FILE for the duration of the block, then tear it down.

    The launch goes to a temporary run dir and does not touch the user's "latest run" record
    (remember=False): a helper deployment is not the one later `pdctl eval`/`status` calls should find.
    """
    topo = load_topology(topology_file)
    run_dir = Path(tempfile.mkdtemp(prefix=f"pdctl-parity-ref-{topo.name}-"))
    try:
        state = launch_topology(topo, run_dir=run_dir, timeout=timeout, detach=True, remember=False)
        yield target_from_state(state, where=f"reference topology {topology_file}")
    finally:
        try:
            if (run_dir / STATE_FILE).exists():
                teardown(run_dir)
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)
