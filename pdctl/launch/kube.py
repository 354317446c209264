"""A launch on Kubernetes: the rendered deployment's manifests applied, its pods watched until ready, and the
run recorded so that `status`, `logs`, `down`, `eval`, `parity` and `bench serve` work from state.json.

Readiness is the kubelet's: a pod is ready when its readiness probe (SGLang's /health, the router's
/readiness) passes, which pdctl reads from the API — the pods' addresses need not be reachable from here.
A pod that cannot get there by waiting (its image cannot be pulled, its container crash-loops) fails the
launch at once with the reason Kubernetes gives and its log tail; the objects stay for inspection until
`pdctl down`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed, UserError
from pdctl.executors.kube_pods import describe, view
from pdctl.executors.kubernetes import Kube, KubernetesExecutor, kube_target, pod_of
from pdctl.render.kubernetes import to_yaml
from pdctl.render.kubernetes.manifests import config, deployment_manifests, names_of
from pdctl.render.kubernetes.names import RUN_LABEL, Names
from pdctl.render.kubernetes.validate import validate_manifests
from pdctl.render.spec import Deployment, ProcessSpec
from pdctl.runs import remember_latest
from pdctl.runs.state import RunState, make_run_dir, new_record, write_deployment

MANIFESTS_FILE = "manifests.yaml"
POLL_S = 2.0
LOG_TAIL = 30
Progress = Callable[[str, str, str], None]


def checked_manifests(deployment: Deployment) -> list[dict[str, Any]]:
    """The deployment's manifests, validated (UserError, exit 2, with every problem: what an API server with
    strict field validation would reject, e.g. a malformed affinity in the kubernetes: section)."""
    objs = deployment_manifests(deployment)
    problems = validate_manifests(objs)
    if problems:
        raise UserError("kubernetes: the manifests would be rejected by the API server:\n  " + "\n  ".join(problems))
    return objs


def write_manifests(run_dir: Path, objs: list[dict[str, Any]]) -> Path:
    """<run_dir>/manifests.yaml: what is (or would be) applied, for `kubectl apply -f` or review."""
    make_run_dir(run_dir)
    path = run_dir / MANIFESTS_FILE
    path.write_text(to_yaml(objs), encoding="utf-8")
    return path


def _ref(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj["apiVersion"], "kind": obj["kind"], "name": meta["name"], "namespace": meta["namespace"]}


def _owned(names: Names, objs: list[dict[str, Any]], role: str) -> list[dict[str, Any]]:
    """What `down` deletes for a process of ROLE: its workload and its Service (rbg: the whole group)."""
    mine = {names.workload(role), names.service(role)} | ({names.rbg} if names.flavor == "rbg" else set())
    return [_ref(o) for o in objs if o["metadata"]["name"] in mine]


def _record(proc: ProcessSpec, run_dir: Path, names: Names, kube: Kube, objs: list[dict[str, Any]]) -> dict[str, Any]:
    record = new_record(proc, run_dir)
    record.update(executor="kubernetes", namespace=names.namespace, kube=kube.target,
                  objects=_owned(names, objs, proc.role), log=None, k8s_container="sglang")
    if proc.role == "router":
        record.update(pod_selector=f"{RUN_LABEL}={names.base},pdctl.dev/role=router",
                      k8s_container="router")
    else:
        record["pod"] = names.pod(proc.role, proc.replica, proc.node_rank)
        http = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"] == names.service(proc.role))
        port = http["spec"]["ports"][0]["port"]
        record["url"] = f"http://{names.leader_host(proc.role, proc.replica)}:{port}" if proc.url else None
    return record


def router_urls(deployment: Deployment, names: Names, kube: Kube) -> tuple[str, str]:
    """(router URL, metrics URL) as pdctl reaches them: kubernetes.router_url, else a LoadBalancer's ingress
    address, else the router Service's cluster DNS name (reachable from inside the cluster)."""
    cfg = config(deployment.topo)
    port, metrics = deployment.topo.router.port, int(deployment.router.ports[-1])
    host = names.service_host("router")
    if cfg.router_service == "LoadBalancer":
        svc = kube.call("GET", f"/api/v1/namespaces/{names.namespace}/services/{names.service('router')}")
        ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
        if ingress:
            host = ingress[0].get("ip") or ingress[0].get("hostname") or host
    if cfg.router_url:
        return cfg.router_url.rstrip("/"), f"http://{host}:{metrics}/metrics"
    return f"http://{host}:{port}", f"http://{host}:{metrics}/metrics"


def _fail(record: dict[str, Any], what: str) -> CheckFailed:
    tail = KubernetesExecutor().read_log(record, LOG_TAIL)
    return CheckFailed(f"{record['name']} (pod {record.get('pod') or 'router'}) {what}", detail=tail or None)


def wait_ready(records: list[dict[str, Any]], timeout: float, progress: Progress) -> None:
    """Poll every record's pod until all are ready; fail at once on a pod that cannot become ready, or at
    the timeout naming the first one still waiting and why."""
    started = time.monotonic()
    pending = list(records)
    last: dict[str, str] = {}
    while pending:
        for record in list(pending):
            pod = pod_of(record)
            elapsed = f"{time.monotonic() - started:.0f}s"
            if pod is None:
                last[record["name"]] = "no pod yet"
                progress(record["name"], "waiting", f"no pod yet ({elapsed})")
                continue
            v = view(pod)
            last[record["name"]] = describe(v)
            if v.ready:
                pending.remove(record)
                progress(record["name"], "healthy", elapsed)
            elif v.fatal:
                progress(record["name"], "failed", v.reason or v.phase)
                raise _fail(record, f"will not become ready: {describe(v)}")
            else:
                progress(record["name"], "waiting", f"{describe(v)} ({elapsed})")
        if not pending:
            return
        if time.monotonic() - started >= timeout:
            record = pending[0]
            progress(record["name"], "failed", "timeout")
            raise _fail(record, f"was not ready within {timeout:.0f}s (last: {last.get(record['name'])})")
        time.sleep(POLL_S)


def launch_on_kubernetes(deployment: Deployment, objs: list[dict[str, Any]], run_dir: Path, *, timeout: float,
                         progress: Progress, remember: bool = True) -> dict[str, Any]:
    """Apply OBJS (DEPLOYMENT's checked manifests), wait until every pod is ready, record the run; its state
    document."""
    names = names_of(deployment.topo)
    kube = Kube(kube_target(config(deployment.topo).context), names.namespace)
    write_deployment(run_dir, deployment)
    write_manifests(run_dir, objs)
    state = RunState(run_dir, deployment)
    state.record_topology(deployment.topo)  # with its --set overrides, if any
    state.doc.update(executor="kubernetes", namespace=names.namespace, kube=kube.target, flavor=names.flavor,
                     objects=[])
    if remember:
        remember_latest(run_dir)
    for obj in objs:  # recorded one by one: `down` deletes what was created even if a later apply fails
        progress(f"{obj['kind']}/{obj['metadata']['name']}", "starting", kube.apply(obj, (RUN_LABEL, names.base)))
        state.doc["objects"].append(_ref(obj))
        state.save()
    records = [_record(p, run_dir, names, kube, objs) for p in deployment.processes()]
    router_url, metrics_url = router_urls(deployment, names, kube)
    records[-1].update(url=router_url, metrics_url=metrics_url)
    state.doc["router_url"] = router_url
    for record in records:
        state.add(record)
    try:
        wait_ready(records, timeout, progress)
    except CheckFailed:
        state.set_status("failed")
        raise
    if deployment.topo.kubernetes and deployment.topo.kubernetes.router_service == "LoadBalancer":
        router_url, metrics_url = router_urls(deployment, names, kube)  # the ingress is assigned by now
        state.doc["router"].update(url=router_url, metrics_url=metrics_url)
        state.doc["router_url"] = router_url
    state.set_status("running")  # as every executor says it: `pdctl runs` checks running runs
    return state.document()
