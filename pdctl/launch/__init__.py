"""pdctl launch: one path from a topology to running processes (deploy), the verdicts it passes (gate), starting
and supervising them (supervisor), and a run's status, logs and teardown.

Python API (used by parity, bench serve and tests): `pdctl.launch.deploy.launch_topology(topo, run_dir=None, *,
timeout=..., skip_compat=False, detach=True) -> state dict` and `pdctl.launch.shutdown.teardown(run_dir)`.
"""
