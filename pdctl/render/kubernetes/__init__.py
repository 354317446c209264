"""Kubernetes manifests of a rendered deployment (LeaderWorkerSet or RoleBasedGroup workloads, the router as a
Deployment, Services): names, pod templates, per-role workloads, the vendored CRD schemas and validation.
Pure: nothing here talks to a cluster (pdctl.executors.kubernetes does)."""

from __future__ import annotations

from typing import Any

import yaml


def to_yaml(objs: list[dict[str, Any]]) -> str:
    """OBJS as one multi-document YAML stream (what `kubectl apply -f` reads), keys in render order."""
    return yaml.safe_dump_all(objs, sort_keys=False, default_flow_style=False, width=1000)
