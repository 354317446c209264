"""A Kubernetes API emulator for tests: kmock's KubernetesEmulator (PyPI kmock: an in-memory API server over
real HTTP: create, get, list, watch, patch, delete, errors as Status objects) with what a cluster adds
around its API server, so that pdctl's kubernetes executor is tested through the official client end to end:

- admission: objects are checked like an API server with strict field validation (built-in kinds against
  Kubernetes' schemas through kubernetes-validate, LWS/RBG against their vendored CRD schemas; 422 Invalid);
  metadata gets uid, resourceVersion and creationTimestamp; lists honour labelSelector;
- controllers: LeaderWorkerSet (group i: leader `<lws>-i`, workers `<lws>-i-k`, the LWS_* env injected as
  lws v0.10.0's pod webhook does, the headless Service), RoleBasedGroup (pods `<rbg>-<role>-i-k`, RBG_LWP_*),
  Deployment (one pod per replica), LoadBalancer Services (an ingress address), garbage collection of pods
  whose owner is gone, re-creation of a deleted pod (a restart);
- a kubelet: every pod is scheduled, its image pulled, its container started and made ready; an image on a
  `.invalid` registry fails to pull (ErrImagePull, then ImagePullBackOff), a role listed in --crash crashes
  (exit 1, CrashLoopBackOff, restartCount growing), one listed in --oom is killed at its memory limit (the
  previous container OOMKilled, exit 137, then CrashLoopBackOff); the container's log (GET pods/NAME/log) starts with the
  command it runs, its $(VAR) references expanded from the container's env as Kubernetes expands them.

Run as its own process: `python -m tests.support.kube_cluster --port-file F [--crash ROLE ...] [--oom ROLE ...]`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import itertools
import json
import re
import shlex
import uuid
from pathlib import Path
from typing import Any

import kmock
from kmock._internal import k8s_dicts, rendering  # noqa: F401  (types of the emulator's store)

from pdctl.render.kubernetes.validate import validate_manifest

PODS = kmock.resource("v1", "pods")
SERVICES = kmock.resource("v1", "services")
DEPLOYMENTS = kmock.resource("apps/v1", "deployments")
LWS = kmock.resource("leaderworkerset.x-k8s.io/v1", "leaderworkersets")
RBG = kmock.resource("workloads.x-k8s.io/v1alpha2", "rolebasedgroups")
VALIDATED = {PODS: False, SERVICES: True, DEPLOYMENTS: True, LWS: True, RBG: True}
TICK_S = 0.1
CRASH_LOG = ("Traceback (most recent call last):\n"
             "RuntimeError: CUDA error: no CUDA-capable device is detected\n")
_VAR = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)")


def _now() -> str:
    return datetime.datetime.now(tz=datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        key, _, value = term.partition("=")
        if labels.get(key.rstrip("=!")) != value.lstrip("="):
            return False
    return True


class Cluster(kmock.KubernetesEmulator):
    """The emulator with admission, label selectors, pod logs and the controllers' state."""

    crash_roles: frozenset[str] = frozenset()
    oom_roles: frozenset[str] = frozenset()
    logs: dict[tuple[str, str], str]
    versions = itertools.count(1)

    async def _handle(self, request: Any) -> Any:
        if request.action == kmock.action.CREATE and request.resource in VALIDATED and isinstance(request.data, dict):
            obj = request.data
            obj.setdefault("metadata", {}).setdefault("namespace", request.namespace)
            problems = validate_manifest(obj) if VALIDATED[request.resource] else []
            if problems:
                raise kmock.KubernetesError(status=422, reason="Invalid", message="; ".join(problems))
            obj["metadata"].update(uid=str(uuid.uuid4()), creationTimestamp=_now(),
                                   resourceVersion=str(next(self.versions)))
        return await super()._handle(request)

    async def _serve_list(self, request: Any) -> Any:
        doc = await super()._serve_list(request)
        selector = request.params.get("labelSelector")
        if selector:
            doc["items"] = [o for o in doc["items"]
                            if _matches(o.get("metadata", {}).get("labels") or {}, selector)]
        return doc

    async def _serve_fetch(self, request: Any) -> Any:
        if request.resource == PODS and request.subresource == "log":
            key = (request.namespace, request.name)
            if self.find(PODS, *key) is None:
                raise kmock.KubernetesObjectNotFoundError()
            lines = self.logs.get(key, "").splitlines(keepends=True)
            tail = request.params.get("tailLines")
            return "".join(lines[-int(tail):] if tail else lines).encode()
        return await super()._serve_fetch(request)

    # -- the store, as the controllers use it --------------------------------------------------------------
    def find(self, res: Any, namespace: str | None, name: str) -> Any:
        for (r, ns, n), obj in self.objects.items():
            if r == res and ns == namespace and n == name and not obj.deleted:
                return obj
        return None

    def live(self, res: Any) -> list[dict[str, Any]]:
        return [obj.raw for (r, _, _), obj in list(self.objects.items()) if r == res and not obj.deleted]

    async def put(self, res: Any, obj: dict[str, Any]) -> None:
        meta = obj["metadata"]
        meta.setdefault("uid", str(uuid.uuid4()))
        meta.setdefault("creationTimestamp", _now())
        async with self._lock:
            key = (res, meta["namespace"], meta["name"])
            if key in self.objects and self.objects[key].deleted:
                self.objects[key].create(obj)
            else:
                self.objects[key] = obj
            await self._buses[res].put({"type": "ADDED", "object": obj})

    async def patch(self, res: Any, namespace: str, name: str, patch: dict[str, Any]) -> None:
        async with self._lock:
            obj = self.find(res, namespace, name)
            if obj is not None:
                obj.patch(patch)
                await self._buses[res].put({"type": "MODIFIED", "object": obj.raw})

    async def remove(self, res: Any, namespace: str, name: str) -> None:
        async with self._lock:
            obj = self.find(res, namespace, name)
            if obj is not None:
                raw = obj.raw
                obj.delete()
                await self._buses[res].put({"type": "DELETED", "object": raw})


# -- controllers ---------------------------------------------------------------------------------------------
def _pod(owner: dict[str, Any], name: str, tpl: dict[str, Any], labels: dict[str, str], env: list[dict[str, Any]],
         annotations: dict[str, str] | None = None, subdomain: str | None = None) -> dict[str, Any]:
    spec = json.loads(json.dumps(tpl.get("spec") or {}))
    for c in spec.get("containers", []):
        names = {e["name"] for e in c.get("env", [])}
        c["env"] = [e for e in env if e["name"] not in names] + c.get("env", [])
    if subdomain:
        spec.update(hostname=name, subdomain=subdomain)
    meta = owner["metadata"]
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": meta["namespace"],
                         "labels": {**((tpl.get("metadata") or {}).get("labels") or {}), **labels},
                         "annotations": annotations or {},
                         "ownerReferences": [{"apiVersion": owner["apiVersion"], "kind": owner["kind"],
                                              "name": meta["name"], "uid": meta.get("uid", "")}]},
            "spec": spec, "status": {"phase": "Pending"}}


def lws_pods(lws: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the LWS controller creates (lws v0.10.0: names, labels, the LWS_* env of its pod webhook)."""
    name, ns = lws["metadata"]["name"], lws["metadata"]["namespace"]
    spec = lws["spec"]
    lwt = spec["leaderWorkerTemplate"]
    size = int(lwt.get("size", 1))
    out = []
    for group in range(int(spec.get("replicas", 1))):
        for worker in range(size):
            tpl = lwt.get("leaderTemplate") if worker == 0 and lwt.get("leaderTemplate") else lwt["workerTemplate"]
            pod = f"{name}-{group}" + (f"-{worker}" if worker else "")
            labels = {"leaderworkerset.sigs.k8s.io/name": name, "leaderworkerset.sigs.k8s.io/group-index": str(group),
                      "leaderworkerset.sigs.k8s.io/worker-index": str(worker)}
            env = [{"name": "LWS_LEADER_ADDRESS", "value": f"{name}-{group}.{name}.{ns}"},
                   {"name": "LWS_GROUP_SIZE", "value": str(size)}, {"name": "LWS_WORKER_INDEX", "value": str(worker)}]
            out.append(_pod(lws, pod, tpl, labels, env, {"leaderworkerset.sigs.k8s.io/size": str(size)}, name))
    return out


def rbg_pods(rbg: dict[str, Any]) -> list[dict[str, Any]]:
    """The pods the RBG controller creates (rbg v0.7.0 v1alpha2, stateful role instances)."""
    name, ns = rbg["metadata"]["name"], rbg["metadata"]["namespace"]
    out = []
    for role in rbg["spec"]["roles"]:
        svc = f"s-{name}-{role['name']}"
        labels = {"rolebasedgroup.workloads.x-k8s.io/group-name": name,
                  "rolebasedgroup.workloads.x-k8s.io/role-name": role["name"]}
        for i in range(int(role.get("replicas", 1))):
            instance = f"{name}-{role['name']}-{i}"
            if "standalonePattern" in role:
                out.append(_pod(rbg, instance, role["standalonePattern"]["template"], labels, [], None, svc))
                continue
            lwp = role["leaderWorkerPattern"]
            size = int(lwp.get("size", 1))
            for k in range(size):
                tpl = json.loads(json.dumps(lwp["template"]))
                if k == 0 and lwp.get("leaderTemplatePatch"):
                    patch = lwp["leaderTemplatePatch"]["spec"]["containers"][0]
                    for c in tpl["spec"]["containers"]:
                        if c["name"] == patch["name"]:
                            c.update(patch)
                env = [{"name": "RBG_LWP_LEADER_ADDRESS", "value": f"{instance}-0.{svc}.{ns}"},
                       {"name": "RBG_LWP_GROUP_SIZE", "value": str(size)},
                       {"name": "RBG_LWP_WORKER_INDEX", "value": str(k)}]
                pod_labels = {**labels, "rolebasedgroup.workloads.x-k8s.io/component-index": str(k)}
                out.append(_pod(rbg, f"{instance}-{k}", tpl, pod_labels, env, None, svc))
    return out


def deployment_pods(dep: dict[str, Any]) -> list[dict[str, Any]]:
    name = dep["metadata"]["name"]
    tpl = dep["spec"]["template"]
    return [_pod(dep, f"{name}-{i}", tpl, {}, []) for i in range(int(dep["spec"].get("replicas", 1)))]


OWNERS = ((LWS, lws_pods), (RBG, rbg_pods), (DEPLOYMENTS, deployment_pods))


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes' $(VAR) expansion of command/args from the container's env (unknown references kept)."""
    return _VAR.sub(lambda m: env.get(m.group(1), m.group(0)), text)


def container_env(pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The container's env with the downward API resolved (labels, the pod's IP)."""
    out: dict[str, str] = {}
    for e in container.get("env", []):
        if "value" in e:
            out[e["name"]] = expand(str(e["value"]), out)
            continue
        path = e.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath", "")
        label = re.match(r"metadata\.labels\['(.+)'\]", path)
        if label:
            out[e["name"]] = pod["metadata"].get("labels", {}).get(label.group(1), "")
        elif path == "status.podIP":
            out[e["name"]] = pod.get("status", {}).get("podIP", "")
    return out


class Kubelet:
    """Moves every pod through scheduling, pull, start and readiness, one step per tick."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.ips = itertools.count(10)
        self.ticks: dict[str, int] = {}

    async def step(self, pod: dict[str, Any]) -> None:
        meta, spec = pod["metadata"], pod["spec"]
        key = meta["namespace"] + "/" + meta["name"] + "/" + meta.get("uid", "")
        n = self.ticks[key] = self.ticks.get(key, 0) + 1
        c = spec["containers"][0]
        name = c["name"]
        status: dict[str, Any]
        if n == 1:
            status = {"phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "True"}]}
            await self.cluster.patch(PODS, meta["namespace"], meta["name"],
                                     {"spec": {"nodeName": f"gpu-node-{next(self.ips) % 4}"}, "status": status})
            return
        ip = f"10.244.0.{abs(hash(key)) % 250 + 2}"
        if c["image"].split("/", 1)[0].endswith(".invalid"):
            reason = "ErrImagePull" if n < 4 else "ImagePullBackOff"
            message = (f'failed to pull image "{c["image"]}": dial tcp: lookup {c["image"].split("/")[0]}: no such host'
                       if n < 4 else f'Back-off pulling image "{c["image"]}"')
            waiting = {"name": name, "ready": False, "restartCount": 0, "image": c["image"],
                       "state": {"waiting": {"reason": reason, "message": message}}}
            status = {"phase": "Pending", "podIP": ip, "containerStatuses": [waiting],
                      "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}
            await self.cluster.patch(PODS, meta["namespace"], meta["name"], {"status": status})
            return
        pod.setdefault("status", {})["podIP"] = ip
        env = container_env(pod, c)
        command = shlex.join(expand(a, env) for a in [*c.get("command", []), *c.get("args", [])])
        log_key = (meta["namespace"], meta["name"])
        role = meta.get("labels", {}).get("pdctl.dev/role")
        if role in self.cluster.crash_roles or role in self.cluster.oom_roles:
            oom = role in self.cluster.oom_roles  # killed by the kernel at its limit: no word of its own
            restarts = max(0, (n - 2) // 2)
            self.cluster.logs[log_key] = f"+ {command}\n" + ("Loading weights ...\n" if oom else CRASH_LOG)
            state = {"waiting": {"reason": "CrashLoopBackOff", "message": f"back-off 10s restarting failed "
                                 f"container={name} pod={meta['name']}"}}
            last = {"terminated": {"exitCode": 137, "reason": "OOMKilled"} if oom else
                    {"exitCode": 1, "reason": "Error"}}
            cs = {"name": name, "ready": False, "restartCount": restarts + 1, "state": state, "lastState": last}
            status = {"phase": "Running", "podIP": ip, "containerStatuses": [cs],
                      "conditions": [{"type": "PodScheduled", "status": "True"}, {"type": "Ready", "status": "False"}]}
        else:
            ready = n >= 3
            self.cluster.logs[log_key] = f"+ {command}\n" + (
                "The server is fired up and ready to roll!\n" if ready else "Loading weights ...\n")
            cs = {"name": name, "ready": ready, "restartCount": 0, "state": {"running": {"startedAt": _now()}}}
            status = {"phase": "Running", "podIP": ip, "containerStatuses": [cs],
                      "conditions": [{"type": "PodScheduled", "status": "True"},
                                     {"type": "Ready", "status": "True" if ready else "False"}]}
        await self.cluster.patch(PODS, meta["namespace"], meta["name"], {"status": status})


async def reconcile(cluster: Cluster, kubelet: Kubelet) -> None:
    """One pass of every controller and the kubelet."""
    owners = set()
    for res, make in OWNERS:
        for owner in cluster.live(res):
            owners.add((owner["kind"], owner["metadata"]["namespace"], owner["metadata"]["name"]))
            for pod in make(owner):
                if cluster.find(PODS, pod["metadata"]["namespace"], pod["metadata"]["name"]) is None:
                    await cluster.put(PODS, pod)
            if res == LWS and cluster.find(SERVICES, owner["metadata"]["namespace"], owner["metadata"]["name"]) is None:
                svc = {"apiVersion": "v1", "kind": "Service",
                       "metadata": {"name": owner["metadata"]["name"], "namespace": owner["metadata"]["namespace"],
                                    "ownerReferences": [{"kind": "LeaderWorkerSet", "name": owner["metadata"]["name"]}]},
                       "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                                "selector": {"leaderworkerset.sigs.k8s.io/name": owner["metadata"]["name"]}}}
                await cluster.put(SERVICES, svc)
    for res in (PODS, SERVICES):  # garbage collection: dependents of a deleted owner go
        for obj in cluster.live(res):
            refs = obj["metadata"].get("ownerReferences") or []
            if refs and all((r["kind"], obj["metadata"]["namespace"], r["name"]) not in owners for r in refs):
                await cluster.remove(res, obj["metadata"]["namespace"], obj["metadata"]["name"])
    for svc in cluster.live(SERVICES):
        if svc.get("spec", {}).get("type") == "LoadBalancer" and not svc.get("status", {}).get("loadBalancer"):
            await cluster.patch(SERVICES, svc["metadata"]["namespace"], svc["metadata"]["name"],
                                {"status": {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}})
    for pod in cluster.live(PODS):
        await kubelet.step(pod)


async def serve(port_file: Path, crash: list[str], oom: list[str]) -> None:
    cluster = Cluster()
    cluster.crash_roles = frozenset(crash)
    cluster.oom_roles = frozenset(oom)
    cluster.logs = {}
    for res in VALIDATED:
        cluster.resources[res] = {}
    async with cluster, kmock.Server(cluster) as server:
        tmp = port_file.with_suffix(".tmp")
        tmp.write_text(str(server.port))
        tmp.replace(port_file)
        kubelet = Kubelet(cluster)
        while True:
            await reconcile(cluster, kubelet)
            await asyncio.sleep(TICK_S)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port-file", type=Path, required=True)
    parser.add_argument("--crash", action="append", default=[], help="pdctl role whose containers crash")
    parser.add_argument("--oom", action="append", default=[], help="pdctl role whose containers are OOMKilled")
    args = parser.parse_args()
    try:
        asyncio.run(serve(args.port_file, args.crash, args.oom))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
