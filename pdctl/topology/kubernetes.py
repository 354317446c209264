"""The `kubernetes:` section: how `pdctl launch --executor kubernetes` puts a topology onto a cluster.

Kept apart from the other sections because it describes the cluster around the servers, not the servers:
the SGLang commands are the ones every executor runs (pdctl.render), and this section only says what pods
they run in (image, scheduling, resources, volumes) and which workload API groups them (`flavor`:
LeaderWorkerSet, the API SGLang's own PD manifests use, or RoleBasedGroup, sgl-project/rbg). Key names
follow Kubernetes' own field names in snake_case (`node_selector`, `image_pull_secrets`, `service_account`),
and `affinity` / `tolerations` are Kubernetes objects written as Kubernetes writes them (they are checked
against Kubernetes' OpenAPI schema when the manifests are validated).

With this section nodes may leave out `host`: they are node *types* (GPU kind and count per machine) that
check-compat and placement read; the scheduler chooses the machines.
"""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from pdctl.topology.base import Section, env_value

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# resource quantities as Kubernetes spells them: 64Gi, 500m, 2, 1.5
QUANTITY = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+|[KMGTPE]i?|[numkMGTPE])?$"
# what a user may not set in resources / rdma_resources: pdctl sets the GPU count per pod itself
GPU_RESOURCE_DEFAULT = "nvidia.com/gpu"


def _quantities(value: Any) -> Any:
    """Resource maps: YAML reads `cpu: 8` as an int; Kubernetes takes quantities as text too."""
    if isinstance(value, dict):
        return {k: env_value(v) if not isinstance(v, bool) else v for k, v in value.items()}
    return value


class KubeVolume(Section):
    """A volume mounted into every engine pod: the model (a PersistentVolumeClaim, or a host path), a cache."""

    name: str = Field(..., pattern=DNS_LABEL, max_length=63, description="Volume name (a DNS label).")
    mount_path: str = Field(..., pattern=r"^/", description="Where it appears in the container, e.g. /models.")
    claim: str | None = Field(None, pattern=DNS_LABEL, description="A PersistentVolumeClaim's name.")
    host_path: str | None = Field(None, pattern=r"^/", description="A path on the node (hostPath).")
    read_only: bool = Field(True, description="Mount read-only (the model is only read).")
    sub_path: str | None = Field(None, description="Mount this path inside the volume instead of its root.")

    @model_validator(mode="after")
    def _one_source(self) -> KubeVolume:
        if (self.claim is None) == (self.host_path is None):
            raise ValueError("give exactly one of claim (a PersistentVolumeClaim) or host_path")
        return self


class KubernetesConfig(Section):
    """Where and how the deployment's pods run. Every engine pod gets the same settings; the GPU count per
    pod follows from placement (a replica's GPUs on one node = one pod), never from this section."""

    flavor: Literal["lws", "rbg"] = Field(
        "lws", description="lws: one LeaderWorkerSet per role (leaderworkerset.x-k8s.io/v1), the router as a "
        "Deployment; rbg: one RoleBasedGroup (workloads.x-k8s.io/v1alpha2) with router, prefill and decode roles.")
    context: str | None = Field(None, min_length=1, description="The kube-config context to use (default: the "
                                "current one; the file is $KUBECONFIG, else ~/.kube/config).")
    namespace: str = Field("default", pattern=DNS_LABEL, max_length=63, description="Namespace of every object.")
    image: str | None = Field(
        None, min_length=1, description="The engine's container image (default: engine.container.image), e.g. "
        "lmsysorg/sglang:v0.5.23-cu129. Required one way or the other.")
    router_image: str | None = Field(None, min_length=1, description="The router's image (default: image).")
    image_pull_policy: Literal["IfNotPresent", "Always", "Never"] = Field(
        "IfNotPresent", description="imagePullPolicy of every container.")
    image_pull_secrets: list[str] = Field(default_factory=list, description="Secrets to pull the images with.")
    service_account: str | None = Field(None, pattern=DNS_LABEL, description="serviceAccountName of every pod.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="nodeSelector of the engine pods.")
    affinity: dict[str, Any] | None = Field(None, description="A Kubernetes Affinity object for the engine pods.")
    tolerations: list[dict[str, Any]] = Field(default_factory=list, description="Kubernetes Tolerations.")
    gpu_resource: str = Field(GPU_RESOURCE_DEFAULT, min_length=1,
                              description="The extended resource GPUs are requested as (per pod: from placement).")
    resources: dict[str, str] = Field(
        default_factory=dict, description="Other resources per engine pod (requests = limits), e.g. {cpu: 32, "
        "memory: 512Gi}.")
    rdma_resources: dict[str, str] = Field(
        default_factory=dict, description='RDMA devices per engine pod, e.g. {"rdma/ib": 1} (the RDMA device '
        "plugin's resource); requests = limits.")
    router_resources: dict[str, str] = Field(default_factory=dict, description="Resources of the router pod.")
    shm_size: str | None = Field(
        "16Gi", pattern=QUANTITY, description="Size of /dev/shm (an in-memory emptyDir); null: the runtime's "
        "default (64 MiB, too small for NCCL).")
    volumes: list[KubeVolume] = Field(default_factory=list, description="Volumes of the engine pods (the model).")
    host_network: bool = Field(False, description="hostNetwork for the engine pods (as SGLang's RDMA examples).")
    privileged: bool = Field(False, description="Run the engine containers privileged.")
    capabilities: list[str] = Field(
        default_factory=list, description="Linux capabilities added to the engine containers (IPC_LOCK is added "
        "for RDMA transfers).")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels on every object and pod.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Annotations on every object and pod.")
    router_service: Literal["ClusterIP", "NodePort", "LoadBalancer"] = Field(
        "ClusterIP", description="Type of the router's Service (LoadBalancer: pdctl reaches the router at its "
        "ingress address).")
    router_url: str | None = Field(
        None, pattern=r"^https?://", description="Where pdctl reaches the router from outside the cluster (an "
        "Ingress, a port-forward); default: the LoadBalancer's address, else the Service's cluster DNS name.")
    restart_policy: Literal["RecreateGroupOnPodRestart", "None"] = Field(
        "RecreateGroupOnPodRestart", description="LWS/RBG group restart policy: a multi-node replica restarts "
        "whole (its ranks cannot rejoin one by one).")

    @field_validator("resources", "rdma_resources", "router_resources", mode="before")
    @classmethod
    def _quantity_text(cls, value: Any) -> Any:
        return _quantities(value)

    @field_validator("resources", "rdma_resources", "router_resources")
    @classmethod
    def _quantity_values(cls, value: dict[str, str]) -> dict[str, str]:
        for name, quantity in value.items():
            if not re.match(QUANTITY, quantity):
                raise ValueError(f"{name}: {quantity!r} is not a Kubernetes quantity (e.g. 8, 500m, 64Gi)")
        return value
