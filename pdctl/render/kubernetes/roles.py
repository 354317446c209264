"""One role's pods as the workload controller runs them: the leader and worker containers of its replicas.

A LeaderWorkerSet (and an RBG role) has ONE pod template for all its replicas, so the replicas of a role
must be alike: the same pods per replica and GPUs per pod (placement's slots), and the same command once
what differs only between machines is taken out. Placement numbers the ports of replicas that share a
machine (role.port + i, bootstrap_port + i); pods have their own addresses, so every replica of a role
serves replica 0's ports, and the router is given each replica's leader address with them (role_urls).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdctl.errors import UserError
from pdctl.render.kubernetes.names import Names
from pdctl.render.kubernetes.pods import engine_container, pod_argv

if TYPE_CHECKING:
    from pdctl.topology import Topology
    from pdctl.topology.kubernetes import KubernetesConfig
    from pdctl.topology.placement import ReplicaPlacement

# flags whose value holds a port placement numbered per replica: every replica serves replica 0's
PER_REPLICA_PORTS = ("--port", "--disaggregation-bootstrap-port", "--dist-init-addr")


@dataclass(frozen=True)
class RolePods:
    """What a role's workload needs: replicas, pods per replica, and the leader/worker containers."""

    role: str
    replicas: int
    size: int  # pods per replica (nodes of a multi-node replica)
    gpus: int  # GPUs per pod
    leader: dict[str, Any]  # the container of node rank 0 (serves HTTP; readiness probe)
    worker: dict[str, Any] | None  # the container of node ranks 1.. (None for single-pod replicas)
    ports: dict[str, int]  # the leader's named ports


def _replica_ports(argv: list[str], ports: dict[str, str]) -> list[str]:
    """ARGV with each per-replica port flag's value replaced by PORTS[flag] (replica 0's)."""
    out = list(argv)
    for i, item in enumerate(out[:-1]):
        if item in ports:
            out[i + 1] = ports[item]
    return out


def _flag(argv: list[str], flag: str) -> str | None:
    for i, item in enumerate(argv[:-1]):
        if item == flag:
            return argv[i + 1]
    return None


def role_pods(topo: Topology, cfg: KubernetesConfig, names: Names, role: str, workers: list[Any],
              placements: list[ReplicaPlacement]) -> RolePods:
    """The pods of ROLE from its rendered processes (WORKERS: ProcessSpecs of every replica and node rank)
    and PLACEMENTS; UserError (exit 2) where one pod template cannot run them all."""
    mine = [p for p in placements if p.role == role]
    first = mine[0]
    for p in mine:
        for slot in p.slots:
            node = topo.node(slot.node)
            if slot.num_gpus > node.gpus:
                raise UserError(f"kubernetes: {p.name} needs {slot.num_gpus} GPUs in one pod on node {node.name}, "
                                f"which has {node.gpus} ({node.gpu}): GPUs per pod above the node type (give the "
                                f"role more nodes, or a smaller tp x pp)")
        shape = [s.num_gpus for s in p.slots]
        if shape != [s.num_gpus for s in first.slots]:
            raise UserError(f"kubernetes: {p.name} is placed as {shape} GPUs per pod but {first.name} as "
                            f"{[s.num_gpus for s in first.slots]}: a LeaderWorkerSet's replicas share one pod "
                            "template (list the role's nodes so that every replica fills whole nodes alike)")
    if len({s.num_gpus for s in first.slots}) > 1:
        raise UserError(f"kubernetes: {first.name} spans nodes with {[s.num_gpus for s in first.slots]} GPUs: the "
                        "pods of a replica get the same GPU count (give each node of the role the same gpus)")
    group = names.group_env if first.nnodes > 1 else None
    procs = {(w.replica, w.node_rank): w for w in workers if w.role == role}
    head = procs[(0, 0)]
    fixed = {flag: value for flag in PER_REPLICA_PORTS if (value := _flag(head.argv, flag)) is not None}
    containers: dict[int, list[str]] = {}
    for (replica, rank), proc in sorted(procs.items()):
        argv = pod_argv(_replica_ports(proc.argv, fixed), group)
        key = 0 if rank == 0 else 1
        if key in containers and containers[key] != argv:
            raise UserError(f"kubernetes: {proc.name}'s command differs from the other pods of {role} (e.g. "
                            "different ib_devices on its node): one pod template runs them all")
        containers.setdefault(key, argv)
    ports = {"http": first.http_port}
    if role == "prefill":
        ports["bootstrap"] = first.bootstrap_port
    if first.dist_init_addr:
        ports["dist-init"] = int(first.dist_init_addr.rsplit(":", 1)[1])
    def container(rank: int) -> dict[str, Any]:
        proc = procs[(0, rank)]
        return engine_container(topo, cfg, argv=containers[min(rank, 1)], env=proc.env,
                                ports=ports if rank == 0 else {}, gpus=first.slots[rank].num_gpus, group=group,
                                leader=rank == 0, health_path=head.health_path)

    return RolePods(role=role, replicas=len(mine), size=first.nnodes, gpus=first.slots[0].num_gpus,
                    leader=container(0), worker=container(1) if first.nnodes > 1 else None, ports=ports)


def role_urls(names: Names, workers: list[Any], pods: dict[str, RolePods]) -> dict[str, str]:
    """The URL each serving worker was rendered with -> the URL of its replica's leader pod on the cluster
    (the controller's DNS name, the role's ports): what the router's --prefill/--decode become."""
    out: dict[str, str] = {}
    for w in workers:
        if w.url and w.role in pods:
            out[w.url] = f"http://{names.leader_host(w.role, w.replica)}:{pods[w.role].ports['http']}"
    return out


def router_argv(argv: list[str], urls: dict[str, str], bootstrap: dict[str, str]) -> list[str]:
    """The router's judged command with each worker URL replaced by its pod's (URLS) and each prefill
    bootstrap port by the one its pod serves (BOOTSTRAP: rendered URL -> port); binds on every interface."""
    out: list[str] = []
    previous_url: str | None = None
    for item in pod_argv(argv, None):
        if item == "--prometheus-host" or (out and out[-1] == "--prometheus-host"):
            out.append(item if item == "--prometheus-host" else "0.0.0.0")
            continue
        if previous_url is not None and previous_url in bootstrap and item.isdigit():
            out.append(bootstrap[previous_url])
            previous_url = None
            continue
        previous_url = item if item in urls else None
        out.append(urls.get(item, item))
    return out
