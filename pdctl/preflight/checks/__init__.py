"""Families of checks over gathered facts; each module's `run(ctx)` returns (node, Check) pairs.

software (reach, interpreter, versions across nodes), gpu (model, count, driver, NVLink domain), rdma (HCA
ports, UCX transports), model (directory and config on every server node), resources (ports, disk, memory),
network (advertised addresses, name resolution, routes between peers).
"""

from __future__ import annotations

from pdctl.preflight.checks import gpu, model, network, rdma, resources, software

FAMILIES = (software, network, gpu, rdma, model, resources)

__all__ = ["FAMILIES"]
