"""Names on the cluster: objects, pods, the leader addresses the workload controllers give, and labels.

Every name here is the workload controller's own rule, so that the router can be given each replica's
address at render time (static URLs, no service discovery):
- LeaderWorkerSet (kubernetes-sigs/lws v0.10.0, pkg/utils/pod/pod_utils.go): group i's leader pod is
  `<lws>-<i>`, its workers `<lws>-<i>-<k>`; every pod sits in the LWS's headless Service `<lws>` (subdomain
  policy Shared), and LWS_LEADER_ADDRESS = `<lws>-<i>.<lws>.<namespace>`.
- RoleBasedGroup (sgl-project/rbg v0.7.0, v1alpha2, stateful RoleInstanceSet): instance i of role R is
  `<rbg>-<R>-<i>`, its pods `<rbg>-<R>-<i>-<k>` (k = 0 the leader), in the headless Service `s-<rbg>-<R>`;
  RBG_LWP_LEADER_ADDRESS = `<instance>-0.s-<rbg>-<R>.<namespace>`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_NAME = 63
PART_OF = "pdctl"
# labels pdctl puts on every object and pod it creates: `pdctl down` and `status` select by them
RUN_LABEL = "pdctl.dev/run"
ROLE_LABEL = "pdctl.dev/role"

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_WORKER_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
RBG_PREFIX = "rolebasedgroup.workloads.x-k8s.io/"
RBG_GROUP_LABEL = RBG_PREFIX + "group-name"
RBG_ROLE_LABEL = RBG_PREFIX + "role-name"
RBG_COMPONENT_INDEX_LABEL = RBG_PREFIX + "component-index"


@dataclass(frozen=True)
class GroupEnv:
    """The environment a workload controller gives every pod of a multi-node replica (the names SGLang's
    --dist-init-addr / --nnodes / --node-rank are rendered from)."""

    leader_address: str
    group_size: str
    worker_index: str
    worker_index_label: str  # the pod label the worker index is read from (set as a fieldRef env as well)


LWS_ENV = GroupEnv("LWS_LEADER_ADDRESS", "LWS_GROUP_SIZE", "LWS_WORKER_INDEX", LWS_WORKER_LABEL)
RBG_ENV = GroupEnv("RBG_LWP_LEADER_ADDRESS", "RBG_LWP_GROUP_SIZE", "RBG_LWP_WORKER_INDEX",
                   RBG_COMPONENT_INDEX_LABEL)


def dns_label(text: str) -> str:
    """TEXT as a DNS-1123 label: lower case, [a-z0-9-], at most 63 characters, no leading/trailing dash."""
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")
    return label[:MAX_NAME].rstrip("-") or "pdctl"


@dataclass(frozen=True)
class Names:
    """The names of one deployment's objects, from its topology name, namespace and flavor."""

    base: str  # the deployment's name as a DNS label (the topology name)
    namespace: str
    flavor: str  # "lws" | "rbg"

    @property
    def group_env(self) -> GroupEnv:
        return LWS_ENV if self.flavor == "lws" else RBG_ENV

    @property
    def rbg(self) -> str:
        """The RoleBasedGroup's name."""
        return self.base

    def workload(self, role: str) -> str:
        """The LeaderWorkerSet of ROLE (lws), or the RBG's workload name for ROLE (rbg)."""
        return f"{self.base}-{role}"

    def headless(self, role: str) -> str:
        """The headless Service the controller puts ROLE's pods in (their DNS subdomain)."""
        return self.workload(role) if self.flavor == "lws" else f"s-{self.base}-{role}"

    def pod(self, role: str, replica: int, rank: int = 0) -> str:
        """The pod of node rank RANK of replica REPLICA of ROLE."""
        if self.flavor == "lws":
            return f"{self.workload(role)}-{replica}" + (f"-{rank}" if rank else "")
        return f"{self.workload(role)}-{replica}-{rank}"

    def leader_host(self, role: str, replica: int) -> str:
        """The DNS name of a replica's leader pod (what the controller's leader-address env says)."""
        return f"{self.pod(role, replica)}.{self.headless(role)}.{self.namespace}"

    def service(self, role: str) -> str:
        """pdctl's Service of ROLE (the router's: its clients' address; a worker role's: HTTP/bootstrap)."""
        return f"{self.base}-{role}-svc" if role != "router" else f"{self.base}-router"

    def service_host(self, role: str) -> str:
        return f"{self.service(role)}.{self.namespace}.svc"

    def labels(self, role: str | None = None) -> dict[str, str]:
        """pdctl's labels: the run (every object) and the role."""
        out = {"app.kubernetes.io/part-of": PART_OF, "app.kubernetes.io/instance": self.base, RUN_LABEL: self.base}
        if role is not None:
            out[ROLE_LABEL] = role
        return out

    def selector(self) -> str:
        """The label selector of everything this deployment created."""
        return f"{RUN_LABEL}={self.base}"


def check_length(name: str, what: str) -> None:
    """Names the controllers derive (pod names, services) must stay DNS labels: raise ValueError early."""
    if len(name) > MAX_NAME:
        raise ValueError(f"{what} {name!r} is {len(name)} characters; Kubernetes allows {MAX_NAME}")
