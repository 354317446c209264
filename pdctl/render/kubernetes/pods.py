"""Pod templates for the engine and the router: the rendered command in a container, with the section's
image, scheduling, resources and volumes.

The container runs the command check-compat judged (pdctl.render), with only what placement decided for a
machine replaced by what the workload controller decides for a pod (pod_argv):
- `--host ADDR` binds the pod's own interfaces (0.0.0.0), as in SGLang's LWS manifests;
- `--dist-init-addr HOST:PORT`, `--nnodes N`, `--node-rank K` read the controller's group environment
  ($(LWS_LEADER_ADDRESS):PORT, $(LWS_GROUP_SIZE), $(LWS_WORKER_INDEX); RBG_LWP_* for RoleBasedGroup), which
  Kubernetes expands in `args` before the process starts;
- `--base-gpu-id` goes: a pod sees only the GPUs it was given, numbered from 0 (CUDA_VISIBLE_DEVICES
  likewise: the device plugin sets it).
Everything else — every SGLang flag and value, the transfer backend's environment — is the judged render.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pdctl.errors import UserError
from pdctl.render.kubernetes.names import GroupEnv, Names

if TYPE_CHECKING:
    from pdctl.topology import Topology
    from pdctl.topology.kubernetes import KubernetesConfig

WILDCARD = "0.0.0.0"
ENGINE_CONTAINER = "sglang"
ROUTER_CONTAINER = "router"
SHM_VOLUME = "dshm"
# set from the pod's address (downward API) unless the topology sets it: the address SGLang's disaggregation
# code gives peers (bootstrap registration, transfer endpoints); SGLang guesses it otherwise
HOST_IP_ENV = "SGLANG_HOST_IP"
# what a pod does not take from the render: its GPUs are chosen by the device plugin
DROPPED_ENV = ("CUDA_VISIBLE_DEVICES",)
DROPPED_FLAGS = ("--base-gpu-id",)
READINESS = {"periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3}


def pod_argv(argv: list[str], env: GroupEnv | None) -> list[str]:
    """ARGV (a judged render) as a pod runs it: see the module docstring. ENV None: a single-pod replica
    (or the router), whose only change is --host."""
    out: list[str] = []
    items = iter(argv)
    for item in items:
        if item in DROPPED_FLAGS:
            next(items, None)
            continue
        if item == "--host":
            next(items, None)
            out += [item, WILDCARD]
        elif env is not None and item == "--dist-init-addr":
            port = str(next(items, "")).rsplit(":", 1)[-1]
            out += [item, f"$({env.leader_address}):{port}"]
        elif env is not None and item == "--nnodes":
            next(items, None)
            out += [item, f"$({env.group_size})"]
        elif env is not None and item == "--node-rank":
            next(items, None)
            out += [item, f"$({env.worker_index})"]
        else:
            out.append(item)
    return out


def image(topo: Topology, cfg: KubernetesConfig) -> str:
    """kubernetes.image, else engine.container.image (a registry reference: a pod cannot run a .sqsh file)."""
    chosen = cfg.image or (topo.engine.container.image if topo.engine.container is not None else None)
    if not chosen:
        raise UserError("kubernetes: no image: set kubernetes.image (or engine.container.image) to the SGLang "
                        "image the pods run, e.g. lmsysorg/sglang:v0.5.23-cu129")
    if chosen.endswith((".sqsh", ".squashfs")) or chosen.startswith("/"):
        raise UserError(f"kubernetes: image {chosen!r} is a file (enroot/pyxis); pods need a registry reference "
                        "(set kubernetes.image)")
    return chosen


def env_list(env: dict[str, str], *, group: GroupEnv | None, host_ip: bool) -> list[dict[str, Any]]:
    """Container env: the render's variables (DROPPED_ENV left out), the pod's address as SGLANG_HOST_IP, and
    for a multi-node replica the worker index read from the pod's label (as SGLang's LWS manifests do, for
    controller releases that do not inject it)."""
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items() if k not in DROPPED_ENV]
    if host_ip and HOST_IP_ENV not in env:
        out.append({"name": HOST_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
    if group is not None:
        label = f"metadata.labels['{group.worker_index_label}']"
        out.append({"name": group.worker_index, "valueFrom": {"fieldRef": {"fieldPath": label}}})
    return out


def resources(cfg: KubernetesConfig, gpus: int) -> dict[str, Any]:
    """Requests = limits: the pod's GPUs, then the section's other resources and RDMA devices."""
    amounts: dict[str, str] = {}
    if gpus:
        amounts[cfg.gpu_resource] = str(gpus)
    for name, value in {**cfg.resources, **cfg.rdma_resources}.items():
        if name == cfg.gpu_resource:
            raise UserError(f"kubernetes: {name} is set from placement (GPUs per pod); leave it out of "
                            "resources / rdma_resources")
        amounts[name] = value
    return {"requests": dict(amounts), "limits": dict(amounts)} if amounts else {}


def engine_container(topo: Topology, cfg: KubernetesConfig, *, argv: list[str], env: dict[str, str],
                     ports: dict[str, int], gpus: int, group: GroupEnv | None, leader: bool,
                     health_path: str | None) -> dict[str, Any]:
    """The SGLang container of one pod of a role: ARGV (already pod_argv'd) split as command + args."""
    container: dict[str, Any] = {
        "name": ENGINE_CONTAINER,
        "image": image(topo, cfg),
        "imagePullPolicy": cfg.image_pull_policy,
        "command": argv[:1],
        "args": argv[1:],
        "env": env_list(env, group=group, host_ip=True),
        "ports": [{"name": name, "containerPort": port, "protocol": "TCP"} for name, port in ports.items()],
    }
    if leader and health_path:
        container["readinessProbe"] = {"httpGet": {"path": health_path, "port": "http"}, **READINESS}
    amounts = resources(cfg, gpus)
    if amounts:
        container["resources"] = amounts
    mounts = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}] if cfg.shm_size else []
    for vol in cfg.volumes:
        mount: dict[str, Any] = {"name": vol.name, "mountPath": vol.mount_path, "readOnly": vol.read_only}
        if vol.sub_path:
            mount["subPath"] = vol.sub_path
        mounts.append(mount)
    if mounts:
        container["volumeMounts"] = mounts
    security = _security(topo, cfg)
    if security:
        container["securityContext"] = security
    if topo.engine.container is not None and topo.engine.container.workdir:
        container["workingDir"] = topo.engine.container.workdir
    return container


def _security(topo: Topology, cfg: KubernetesConfig) -> dict[str, Any]:
    caps = list(cfg.capabilities)
    if topo.is_pd and topo.transfer.protocol == "rdma" and "IPC_LOCK" not in caps:
        caps.append("IPC_LOCK")  # RDMA memory registration pins pages
    out: dict[str, Any] = {}
    if cfg.privileged:
        out["privileged"] = True
    if caps:
        out["capabilities"] = {"add": caps}
    return out


def pod_spec(cfg: KubernetesConfig, containers: list[dict[str, Any]], *, engine: bool) -> dict[str, Any]:
    """A pod spec around CONTAINERS: the section's scheduling for engine pods (GPU nodes); the router pod
    gets the pull secrets, service account and tolerations only (it needs no GPU node)."""
    spec: dict[str, Any] = {"containers": containers}
    if cfg.service_account:
        spec["serviceAccountName"] = cfg.service_account
    if cfg.image_pull_secrets:
        spec["imagePullSecrets"] = [{"name": s} for s in cfg.image_pull_secrets]
    if cfg.tolerations:
        spec["tolerations"] = [dict(t) for t in cfg.tolerations]
    if not engine:
        return spec
    if cfg.node_selector:
        spec["nodeSelector"] = dict(cfg.node_selector)
    if cfg.affinity:
        spec["affinity"] = dict(cfg.affinity)
    if cfg.host_network:
        spec["hostNetwork"] = True
        spec["dnsPolicy"] = "ClusterFirstWithHostNet"
    volumes: list[dict[str, Any]] = []
    if cfg.shm_size:
        volumes.append({"name": SHM_VOLUME, "emptyDir": {"medium": "Memory", "sizeLimit": cfg.shm_size}})
    for vol in cfg.volumes:
        if vol.claim is not None:
            volumes.append({"name": vol.name, "persistentVolumeClaim": {"claimName": vol.claim,
                                                                       "readOnly": vol.read_only}})
        else:
            volumes.append({"name": vol.name, "hostPath": {"path": vol.host_path, "type": "Directory"}})
    if volumes:
        spec["volumes"] = volumes
    return spec


def spread_host_network(spec: dict[str, Any], labels: dict[str, str], host_network: bool) -> dict[str, Any]:
    """With hostNetwork, pods of one role must not share a machine: every replica serves replica 0's ports
    (one pod template), so two on one node both bind e.g. 30000 and 8998 and the second fails (the hazard
    sglang PR #31964 names for hostNetwork replicas). A required pod anti-affinity on the node's hostname for
    the role's pods (LABELS), added to the section's affinity."""
    if not host_network:
        return spec
    term = {"labelSelector": {"matchLabels": dict(labels)}, "topologyKey": "kubernetes.io/hostname"}
    affinity = {k: dict(v) if isinstance(v, dict) else v for k, v in (spec.get("affinity") or {}).items()}
    anti = affinity.setdefault("podAntiAffinity", {})
    anti["requiredDuringSchedulingIgnoredDuringExecution"] = [
        *anti.get("requiredDuringSchedulingIgnoredDuringExecution", []), term]
    return {**spec, "affinity": affinity}


def template(names: Names, cfg: KubernetesConfig, role: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A PodTemplateSpec: pdctl's labels (and the section's) on the pod, the section's annotations."""
    meta: dict[str, Any] = {"labels": {**cfg.labels, **names.labels(role)}}
    if cfg.annotations:
        meta["annotations"] = dict(cfg.annotations)
    return {"metadata": meta, "spec": spec}
