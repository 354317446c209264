"""The manifests of a rendered deployment: what `pdctl launch --executor kubernetes` applies (and --dry-run
writes), derived from the one render check-compat judged.

flavor lws (the objects SGLang's own LWS manifests and Helm chart use):
- one LeaderWorkerSet per role: replicas = the role's replicas, size = pods per replica (nodes of a
  multi-node TP/PP replica), the leader and worker containers from roles.role_pods;
- a Service per role (`<name>-<role>-svc`) selecting the role's leader pods: its HTTP (and bootstrap) ports
  for clients and Prometheus; the router is NOT pointed at it (see below);
- the router as a Deployment + Service (`<name>-router`: type kubernetes.router_service).
flavor rbg: one RoleBasedGroup with roles router (standalonePattern), prefill and decode
(leaderWorkerPattern), plus the same Services.

Router -> workers: static URLs, each replica's leader pod by the DNS name its controller gives it (headless
Service). Not service discovery by pod labels: the router's discovery mode needs a ServiceAccount with
list/watch on pods (RBAC), changes the router's command from the one rendered for every other executor, and
finds prefill bootstrap ports from pod annotations; the topology fixes the replica count anyway, and the DNS
names survive pod restarts. Not one ClusterIP Service per role either (SGLang's examples): a PD request's
bootstrap must reach the prefill replica the router chose, which a load-balanced Service cannot promise with
more than one replica.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pdctl.errors import UserError
from pdctl.render.kubernetes.crds import api_version
from pdctl.render.kubernetes.names import (
    LWS_NAME_LABEL,
    LWS_WORKER_LABEL,
    RBG_COMPONENT_INDEX_LABEL,
    RBG_GROUP_LABEL,
    RBG_ROLE_LABEL,
    Names,
    check_length,
    dns_label,
)
from pdctl.render.kubernetes.pods import (
    ROUTER_CONTAINER,
    image,
    pod_spec,
    resources,
    spread_host_network,
    template,
)
from pdctl.render.kubernetes.roles import RolePods, role_pods, role_urls, router_argv

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment
    from pdctl.topology import Topology
    from pdctl.topology.kubernetes import KubernetesConfig
    from pdctl.topology.placement import ReplicaPlacement

RBG_RESTART = {"RecreateGroupOnPodRestart": "RecreateRoleInstanceOnPodRestart", "None": "None"}


def names_of(topo: Topology) -> Names:
    cfg = config(topo)
    return Names(base=dns_label(topo.name), namespace=cfg.namespace, flavor=cfg.flavor)


def config(topo: Topology) -> KubernetesConfig:
    """The topology's kubernetes: section (UserError without one)."""
    if topo.kubernetes is None:
        raise UserError(f"{topo.name}: --executor kubernetes needs a kubernetes: section (namespace, image, ...)")
    return topo.kubernetes


def _meta(names: Names, cfg: KubernetesConfig, name: str, role: str | None) -> dict[str, Any]:
    check_length(name, "object name")
    meta: dict[str, Any] = {"name": name, "namespace": names.namespace,
                            "labels": {**cfg.labels, **names.labels(role)}}
    if cfg.annotations:
        meta["annotations"] = dict(cfg.annotations)
    return meta


def _engine_spec(cfg: KubernetesConfig, container: dict[str, Any], names: Names, role: str) -> dict[str, Any]:
    return spread_host_network(pod_spec(cfg, [container], engine=True), names.labels(role), cfg.host_network)


def leader_worker_set(names: Names, cfg: KubernetesConfig, pods: RolePods) -> dict[str, Any]:
    """The LeaderWorkerSet of one role."""
    lwt: dict[str, Any] = {"size": pods.size, "restartPolicy": cfg.restart_policy}
    if pods.worker is None:
        lwt["workerTemplate"] = template(names, cfg, pods.role, _engine_spec(cfg, pods.leader, names, pods.role))
    else:
        lwt["leaderTemplate"] = template(names, cfg, pods.role, _engine_spec(cfg, pods.leader, names, pods.role))
        lwt["workerTemplate"] = template(names, cfg, pods.role, _engine_spec(cfg, pods.worker, names, pods.role))
    return {"apiVersion": api_version("lws"), "kind": "LeaderWorkerSet",
            "metadata": _meta(names, cfg, names.workload(pods.role), pods.role),
            "spec": {"replicas": pods.replicas, "startupPolicy": "LeaderCreated", "leaderWorkerTemplate": lwt}}


def _rbg_role(names: Names, cfg: KubernetesConfig, pods: RolePods) -> dict[str, Any]:
    """An RBG role: leaderWorkerPattern with one template (the worker's command; node rank from the env)
    and the leader's differences (ports, readiness probe) as its leaderTemplatePatch."""
    base = pods.worker or pods.leader
    pattern: dict[str, Any] = {"size": pods.size, "restartPolicy": RBG_RESTART[cfg.restart_policy],
                               "template": template(names, cfg, pods.role, _engine_spec(cfg, base, names, pods.role))}
    if pods.worker is not None:
        diff = {k: v for k, v in pods.leader.items() if k in ("ports", "readinessProbe") or k == "name"}
        pattern["leaderTemplatePatch"] = {"spec": {"containers": [diff]}}
        if pods.leader["args"] != pods.worker["args"]:
            raise UserError(f"kubernetes (rbg): {pods.role}'s leader and worker commands differ; an RBG role has "
                            "one template (use flavor: lws)")
    return {"name": pods.role, "replicas": pods.replicas, "leaderWorkerPattern": pattern}


def _router_pod(topo: Topology, cfg: KubernetesConfig, names: Names, argv: list[str],
                router: Any, ports: dict[str, int]) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": ROUTER_CONTAINER, "image": cfg.router_image or image(topo, cfg),
        "imagePullPolicy": cfg.image_pull_policy, "command": argv[:1], "args": argv[1:],
        "ports": [{"name": n, "containerPort": p, "protocol": "TCP"} for n, p in ports.items()],
        "readinessProbe": {"httpGet": {"path": router.health_path or "/readiness", "port": "http"},
                           "periodSeconds": 5, "timeoutSeconds": 5, "failureThreshold": 3},
    }
    if router.env:
        container["env"] = [{"name": k, "value": v} for k, v in router.env.items()]
    amounts = {"requests": dict(cfg.router_resources), "limits": dict(cfg.router_resources)}
    if cfg.router_resources:
        container["resources"] = amounts
    return template(names, cfg, "router", pod_spec(cfg, [container], engine=False))


def _service(names: Names, cfg: KubernetesConfig, role: str, selector: dict[str, str], ports: dict[str, int],
             kind: str = "ClusterIP") -> dict[str, Any]:
    spec: dict[str, Any] = {"type": kind, "selector": selector,
                            "ports": [{"name": n, "port": p, "targetPort": n, "protocol": "TCP"}
                                      for n, p in ports.items()]}
    return {"apiVersion": "v1", "kind": "Service", "metadata": _meta(names, cfg, names.service(role), role),
            "spec": spec}


def _leader_selector(names: Names, role: str) -> dict[str, str]:
    if names.flavor == "lws":
        return {LWS_NAME_LABEL: names.workload(role), LWS_WORKER_LABEL: "0"}
    return {RBG_GROUP_LABEL: names.rbg, RBG_ROLE_LABEL: role, RBG_COMPONENT_INDEX_LABEL: "0"}


def render_manifests(topo: Topology, workers: list[Any], router: Any,
                     placements: list[ReplicaPlacement]) -> list[dict[str, Any]]:
    """Every object of the deployment, in apply order (workloads, their Services, the router); UserError
    (exit 2) for what cannot run on Kubernetes. WORKERS / ROUTER: the rendered processes (ProcessSpec)."""
    if topo.engine.kind != "sglang":
        raise UserError("kubernetes: pods run SGLang images (engine.kind: sglang); the reference engine runs "
                        "with the local, ssh and slurm executors")
    cfg = config(topo)
    names = names_of(topo)
    roles = [r.name for r in topo.roles()]
    pods = {role: role_pods(topo, cfg, names, role, workers, placements) for role in roles}
    for role, p in pods.items():
        check_length(names.pod(role, p.replicas - 1, p.size - 1), "pod name")
    urls = role_urls(names, workers, pods)
    bootstrap = {w.url: str(pods["prefill"].ports["bootstrap"]) for w in workers
                 if w.url and w.role == "prefill"}
    # the router runs in the image with engine.python (a render for a machine may name this machine's
    # interpreter, when pdctl would start the router here)
    rargv = [topo.engine.python, *router_argv(router.argv, urls, bootstrap)[1:]]
    rports = {"http": topo.router.port, "metrics": int(router.ports[-1])}
    router_pod = _router_pod(topo, cfg, names, rargv, router, rports)
    out: list[dict[str, Any]] = []
    if cfg.flavor == "lws":
        out += [leader_worker_set(names, cfg, pods[role]) for role in roles]
    else:
        rbg_roles = [{"name": "router", "replicas": 1, "standalonePattern": {"template": router_pod}}]
        rbg_roles += [_rbg_role(names, cfg, pods[role]) for role in roles]
        out.append({"apiVersion": api_version("rbg"), "kind": "RoleBasedGroup",
                    "metadata": _meta(names, cfg, names.rbg, None), "spec": {"roles": rbg_roles}})
    out += [_service(names, cfg, role, _leader_selector(names, role), pods[role].ports) for role in roles]
    if cfg.flavor == "lws":
        selector = {**names.labels("router")}
        out.append({"apiVersion": "apps/v1", "kind": "Deployment",
                    "metadata": _meta(names, cfg, names.workload("router"), "router"),
                    "spec": {"replicas": 1, "selector": {"matchLabels": selector}, "template": router_pod}})
    else:
        selector = {RBG_GROUP_LABEL: names.rbg, RBG_ROLE_LABEL: "router"}
    out.append(_service(names, cfg, "router", selector, rports, cfg.router_service))
    return out


def deployment_manifests(deployment: Deployment) -> list[dict[str, Any]]:
    """The manifests of a rendered DEPLOYMENT (pdctl.render.deployment.render with executor kubernetes)."""
    return render_manifests(deployment.topo, deployment.workers, deployment.router, deployment.placements)


__all__ = ["config", "deployment_manifests", "leader_worker_set", "names_of", "render_manifests", "resources"]
