"""Families of checks over gathered facts; each module's `run(ctx)` returns (node, Check) pairs.

software (reach, interpreter, versions across nodes), gpu (model, count, driver, NVLink domain), rdma (HCA
ports, UCX transports), fabric (UCX_NET_DEVICES scoping, GPU-affine HCAs, GPU memory registration), model (directory
and config on every server node), resources (ports, disk, memory), network (advertised addresses, name resolution,
routes between peers), shared (a Slurm job's run dir reads the same on every node).
"""

from __future__ import annotations

from pdctl.preflight.checks import fabric, gpu, model, network, rdma, resources, shared, software

FAMILIES = (software, network, gpu, rdma, fabric, model, resources, shared)

__all__ = ["FAMILIES"]
