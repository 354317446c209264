"""The kubernetes executor: a deployment's objects applied to a cluster, and its processes (pods) read,
restarted and deleted through the API, with the official `kubernetes` client (PyPI `kubernetes`, the
`pdctl[kubernetes]` extra).

The cluster is reached as kubectl reaches it: the kube-config file ($KUBECONFIG, else ~/.kube/config) and its
current context, or the topology's `kubernetes.context`; inside a pod, the service account. Every record a
launch writes names its kube-config, context and namespace, so `status`, `logs` and `down` in a fresh pdctl
process talk to the same cluster. A record's `objects` are what `down` deletes for it: exactly the objects
this launch created, found by name, never by a broad selector.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

from pdctl.errors import CheckFailed, UserError
from pdctl.executors.base import CommandResult
from pdctl.executors.kube_pods import PodView, describe, view
from pdctl.render.kubernetes.crds import by_kind, sources
from pdctl.render.spec import ProcessSpec

INSTALL_HINT = "the kubernetes executor needs the kubernetes client: pip install 'pdctl[kubernetes]'"
DELETE_POLL_S = 1.0
# built-in kinds pdctl renders -> (API path prefix, plural)
BUILTIN = {("v1", "Service"): ("/api/v1", "services"), ("apps/v1", "Deployment"): ("/apis/apps/v1", "deployments"),
           ("v1", "Pod"): ("/api/v1", "pods")}


def kube_target(context: str | None) -> dict[str, Any]:
    """Which cluster: the kube-config file kubectl would read (None inside a pod) and the context."""
    if os.environ.get("KUBECONFIG"):
        path: str | None = os.environ["KUBECONFIG"].split(os.pathsep)[0]
    else:
        default = Path.home() / ".kube" / "config"
        path = str(default) if default.exists() or not os.environ.get("KUBERNETES_SERVICE_HOST") else None
    return {"config_file": str(Path(path).resolve()) if path else None, "context": context}


@cache
def _client(config_file: str | None, context: str | None) -> Any:
    try:
        from kubernetes import client, config
    except ImportError as exc:
        raise UserError(INSTALL_HINT) from exc
    configuration = client.Configuration()
    try:
        if config_file is None:
            config.load_incluster_config(client_configuration=configuration)
        else:
            config.load_kube_config(config_file=config_file, context=context, client_configuration=configuration)
    except (config.ConfigException, OSError) as exc:
        raise UserError(f"kubernetes: cannot read the kube-config ({config_file or 'in-cluster'}): {exc}") from exc
    return client.ApiClient(configuration)


class Kube:
    """One cluster and namespace, through the official client's ApiClient (plain JSON objects in and out)."""

    def __init__(self, target: dict[str, Any], namespace: str) -> None:
        self.target = target
        self.namespace = namespace
        self.api = _client(target.get("config_file"), target.get("context"))

    def call(self, method: str, path: str, *, body: Any = None, query: dict[str, Any] | None = None,
             stream: bool = False, timeout: float = 30.0) -> Any:
        """One API call; the decoded JSON (text for logs; the raw response with STREAM). ApiException
        passes through; a connection failure is a UserError (the cluster the kube-config names is down)."""
        from kubernetes.client.exceptions import ApiException

        try:
            method, url, headers, body, _ = self.api.param_serialize(
                method, path, query_params=list((query or {}).items()), body=body,
                header_params={"Content-Type": "application/json", "Accept": "*/*"}, auth_settings=["BearerToken"])
            resp = self.api.call_api(method, url, header_params=headers, body=body,
                                     _request_timeout=None if stream else timeout)
        except ApiException:
            raise
        except Exception as exc:  # urllib3's connection errors
            host = self.api.configuration.host
            raise UserError(f"kubernetes: cannot reach the API server at {host}: {exc}") from exc
        if stream and resp.status < 400:
            return resp.response  # urllib3's response, read as it arrives
        data = resp.read().decode(errors="replace")
        if resp.status >= 400:
            raise ApiException(http_resp=resp, body=data)
        return json.loads(data) if data.startswith(("{", "[")) else data

    @staticmethod
    def path(obj: dict[str, Any], namespace: str, name: str | None = None) -> str:
        """The REST path of OBJ's collection (or of the object NAME)."""
        api, kind = obj["apiVersion"], obj["kind"]
        if (api, kind) in BUILTIN:
            prefix, plural = BUILTIN[(api, kind)]
        else:
            flavor = by_kind(kind)
            if flavor is None:
                raise UserError(f"kubernetes: pdctl does not manage {api} {kind}")
            prefix, plural = f"/apis/{api}", sources()[flavor]["plural"]
        base = f"{prefix}/namespaces/{namespace}/{plural}"
        return f"{base}/{name}" if name else base

    def apply(self, obj: dict[str, Any], run_label: tuple[str, str]) -> str:
        """Create OBJ (strict field validation: the API server rejects unknown fields); if an object of that
        name exists and carries this run's label, patch it; one that is not this run's is left alone
        (UserError). Returns 'created' | 'configured'."""
        from kubernetes.client.exceptions import ApiException

        ns = obj["metadata"].get("namespace", self.namespace)
        name = obj["metadata"]["name"]
        try:
            self.call("POST", self.path(obj, ns), body=obj, query={"fieldValidation": "Strict"})
            return "created"
        except ApiException as exc:
            if exc.status != 409:
                raise CheckFailed(f"kubernetes: {obj['kind']} {name} was rejected: {_api_message(exc)}") from exc
        current = self.call("GET", self.path(obj, ns, name))
        key, value = run_label
        if (current.get("metadata", {}).get("labels") or {}).get(key) != value:
            raise UserError(f"kubernetes: {obj['kind']} {ns}/{name} exists and is not this run's (no {key}={value}); "
                            "pdctl will not change it (choose another name or namespace)")
        self.call("PATCH", self.path(obj, ns, name), body=obj)
        return "configured"

    def delete(self, ref: dict[str, Any]) -> bool:
        """Delete the object REF names (foreground: its pods go with it); False if it was already gone."""
        from kubernetes.client.exceptions import ApiException

        try:
            self.call("DELETE", self.path(ref, ref["namespace"], ref["name"]),
                      body={"kind": "DeleteOptions", "apiVersion": "v1", "propagationPolicy": "Foreground"})
            return True
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise CheckFailed(f"kubernetes: deleting {ref['kind']} {ref['name']} failed: {_api_message(exc)}") from exc

    def pods(self, selector: str) -> list[dict[str, Any]]:
        return self.call("GET", f"/api/v1/namespaces/{self.namespace}/pods",
                         query={"labelSelector": selector}).get("items", [])

    def pod(self, name: str) -> dict[str, Any] | None:
        from kubernetes.client.exceptions import ApiException

        try:
            return self.call("GET", f"/api/v1/namespaces/{self.namespace}/pods/{name}")
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def log(self, pod: str, container: str, *, tail: int, previous: bool = False) -> str:
        from kubernetes.client.exceptions import ApiException

        query: dict[str, Any] = {"container": container, "tailLines": tail}
        if previous:
            query["previous"] = "true"
        try:
            text = self.call("GET", f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log", query=query)
        except ApiException as exc:
            if exc.status in (400, 404):  # no such pod, or no previous container
                return ""
            raise
        return text if isinstance(text, str) else json.dumps(text)

    def follow(self, pod: str, container: str, tail: int) -> Iterator[str]:
        resp = self.call("GET", f"/api/v1/namespaces/{self.namespace}/pods/{pod}/log",
                         query={"container": container, "tailLines": tail, "follow": "true"}, stream=True)
        try:
            for line in resp.stream(amt=4096, decode_content=True):
                yield line.decode(errors="replace")
        finally:
            resp.release_conn()


def _api_message(exc: Any) -> str:
    try:
        return json.loads(exc.body).get("message") or str(exc.reason)
    except (TypeError, ValueError):
        return str(exc.reason)


def kube_of(record: dict[str, Any]) -> Kube:
    """The cluster a state record names."""
    return Kube(record["kube"], record["namespace"])


def pod_of(record: dict[str, Any]) -> dict[str, Any] | None:
    """The pod running RECORD's process: by name (workers), or the one pod of its selector (the router)."""
    kube = kube_of(record)
    if record.get("pod"):
        return kube.pod(record["pod"])
    pods = kube.pods(record["pod_selector"])
    live = [p for p in pods if not (p.get("metadata") or {}).get("deletionTimestamp")]
    return live[0] if live else (pods[0] if pods else None)


class KubernetesExecutor:
    """The Executor protocol (pdctl.executors.base) for a process that runs in a pod; `start` is the
    launch's apply (pdctl.launch.kube), not one process at a time."""

    kind = "kubernetes"

    def start(self, proc: ProcessSpec, log: str) -> dict[str, Any]:
        raise UserError("kubernetes: processes start together, as the deployment's objects are applied")

    def pod_view(self, record: dict[str, Any]) -> PodView | None:
        pod = pod_of(record)
        return view(pod) if pod is not None else None

    def platform_lines(self, record: dict[str, Any]) -> list[str]:
        """The pod's reason (ErrImagePull, CrashLoopBackOff, OOMKilled, ...) with the kubelet's message, after
        why its container's previous run ended (a container OOMKilled, then waiting in CrashLoopBackOff: the
        kill is the cause); [] for a pod that runs fine (whatever its containers' past) or is gone."""
        v = self.pod_view(record)
        if v is None or not v.reason:  # runs fine (a container that restarted once and now serves too)
            return []
        last = [f"pod {v.name}: previous container ended {v.last_end}"] if v.last_end else []
        return [*last, f"pod {v.name}: {v.reason} {v.message or ''}".strip()]

    def exit_code(self, record: dict[str, Any]) -> int | None:
        v = self.pod_view(record)
        if v is None:
            return -1
        if v.fatal or v.phase in ("Failed", "Succeeded"):
            return v.exit_code if v.exit_code is not None else -1
        return None

    def process_state(self, record: dict[str, Any]) -> str | None:
        """No process state letter for a pod's container: its readiness (exit_code, health) says what is known."""
        return None

    def group_alive(self, record: dict[str, Any]) -> bool:
        v = self.pod_view(record)
        return v is not None and v.phase in ("Pending", "Running")

    def health(self, record: dict[str, Any]) -> dict[str, Any]:
        """Status from the pod (the kubelet runs the readiness probe: pdctl need not reach the pod)."""
        v = self.pod_view(record)
        if v is None:
            return {"alive": False, "healthy": False, "detail": "no pod"}
        alive = not v.fatal and v.phase in ("Pending", "Running")
        return {"alive": alive, "healthy": v.ready, "detail": describe(v), **v.to_json()}

    def unreachable(self, result: CommandResult) -> bool:
        """False: run reaches no node (it refuses before anything runs)."""
        return False

    def signal_group(self, record: dict[str, Any], sig: int) -> None:
        """Any signal deletes the pod: its controller starts a new one (the pod's restart)."""
        v = self.pod_view(record)
        if v is not None:
            kube_of(record).delete({"apiVersion": "v1", "kind": "Pod", "name": v.name,
                                    "namespace": record["namespace"]})

    def stop(self, record: dict[str, Any], grace_s: float) -> str:
        """Delete the objects the record owns (its workload, Service); then wait up to GRACE_S for its pod."""
        kube = kube_of(record)
        deleted = [kube.delete(ref) for ref in record.get("objects", [])]
        deadline = time.monotonic() + grace_s
        while pod_of(record) is not None:
            if time.monotonic() >= deadline:
                return "deleting"
            time.sleep(DELETE_POLL_S)
        return "deleted" if any(deleted) else "not running"

    def read_log(self, record: dict[str, Any], tail: int) -> str:
        """The container's log; for a container that crashed and waits to restart, its previous run's."""
        v = self.pod_view(record)
        if v is None:
            return ""
        kube = kube_of(record)
        text = kube.log(v.name, record["k8s_container"], tail=tail)
        if not text.strip() and v.restarts:
            text = kube.log(v.name, record["k8s_container"], tail=tail, previous=True)
        return text

    def follow_log(self, record: dict[str, Any], tail: int) -> Iterator[str]:
        v = self.pod_view(record)
        if v is None:
            raise UserError(f"{record['name']}: no pod to follow")
        return kube_of(record).follow(v.name, record["k8s_container"], tail)

    def run(self, argv: list[str], *, timeout: float, env: dict[str, str] | None = None) -> CommandResult:
        raise UserError("kubernetes: pdctl runs no commands on cluster nodes (preflight and the version question "
                        "need the local, ssh or slurm executor)")

    def popen(self, argv: list[str], *, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
        raise UserError("kubernetes: pdctl holds no conversations with cluster nodes")
