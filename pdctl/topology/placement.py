"""Where each replica of each role runs: nodes, GPU ranges, multi-node rendezvous, ports (TOPOLOGY.md).

Placement never raises: a topology that over-subscribes its nodes still gets a deterministic placement (the
surplus lands past the last GPU of the role's last node), so launch --dry-run can show it, and
`placement_problems()` explains what is wrong for the compat `placement` rule.

On Kubernetes a node without host is a node TYPE (is_node_type), not a machine: it stands for as many
machines of that kind as the replicas need, and the scheduler gives each pod its own GPUs. Every replica on
node types gets its own pod(s) from GPU 0 (one pod per replica-node), so replicas never over-subscribe a
type; a replica wider than the type spans the fewest pods that split it evenly (SGLang multi-node needs
tp x pp / nnodes GPUs on every node). Port facts are here too,
because ports follow from placement (replica offsets, which node a process lands on).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

from pdctl.topology.model import Node, RoleConfig, Topology, offset_port

# dist-init (torch rendezvous) port of a multi-node replica: http_port + offset (or - offset near 65535).
DIST_INIT_PORT_OFFSET = 1000
LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "::1", "0.0.0.0", "::"})


def is_loopback(host: str) -> bool:
    """127.0.0.0/8, ::1, localhost and the wildcard addresses: spellings of this machine."""
    h = host.strip().strip("[]").lower()
    return h in LOOPBACK_NAMES or h.startswith("127.")


def is_node_type(topo: Topology, node: Node) -> bool:
    """A Kubernetes node without host: a kind of machine the scheduler places pods on, as many as needed."""
    return topo.kubernetes is not None and node.host is None


def machine_key(node: Node) -> str:
    """Which machine a node is: nodes with equal hosts are one machine, and so are loopback spellings
    (127.0.0.1, localhost, ::1) — their GPUs and ports are shared. Nodes Slurm assigns at run time (no host)
    are distinct machines: a job's nodes are."""
    if node.host is None:
        return node.target
    return "localhost" if is_loopback(node.host) else node.host.strip().strip("[]").lower()


@dataclass(frozen=True)
class NodeSlot:
    """The GPUs one replica uses on one node: [base_gpu_id, base_gpu_id + num_gpus)."""

    node: str
    host: str  # the node's advertised address (Node.address): what URLs and rendezvous use
    base_gpu_id: int
    num_gpus: int
    node_rank: int


@dataclass(frozen=True)
class ReplicaPlacement:
    """One server process group (a replica of a role), possibly spanning several nodes."""

    role: str
    replica: int
    http_port: int
    bootstrap_port: int  # 0 for colocated replicas (no bootstrap server)
    slots: list[NodeSlot] = field(default_factory=list)
    nnodes: int = 1
    dist_init_addr: str | None = None
    url: str = ""

    @property
    def name(self) -> str:
        """'prefill[0]': how messages and logs name this replica."""
        return f"{self.role}[{self.replica}]"

    @property
    def num_gpus(self) -> int:
        """GPUs (cpu: rank slots) over all slots."""
        return sum(s.num_gpus for s in self.slots)


def host_for_url(host: str) -> str:
    """Bracket IPv6 literals so they can sit in a URL."""
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def dist_init_port(http_port: int) -> int:
    """Deterministic rendezvous port of a multi-node replica, kept inside the valid port range."""
    return offset_port(http_port, DIST_INIT_PORT_OFFSET)


def bootstrap_port_of(topo: Topology, role: str, replica: int) -> int:
    """Prefill replica i serves bootstrap on bootstrap_port + i; decode j pairs with prefill j % P.

    0 for a colocated replica: it has no bootstrap server and talks to no other server.
    """
    if role == "colocated" or topo.prefill is None:
        return 0
    prefill_index = replica if role == "prefill" else replica % topo.prefill.replicas
    return topo.transfer.bootstrap_port + prefill_index


Piece = tuple[Node, int, int]  # (node, base_gpu_id, num_gpus)


class _MachineGpus(dict):
    """GPUs taken so far, counted per machine but looked up by node name (nodes of one machine share)."""

    def __init__(self, topo: Topology) -> None:
        super().__init__()
        self.machine = {n.name: machine_key(n) for n in topo.nodes}

    def __getitem__(self, node: str) -> int:
        return super().get(self.machine[node], 0)

    def __setitem__(self, node: str, value: int) -> None:
        super().__setitem__(self.machine[node], value)


def _place_replica(
    need: int, nodes: list[Node], used: dict[str, int], cursor: int
) -> tuple[list[Piece], int]:
    """(node, base, count) pieces for one replica of `need` GPUs, and the new cursor (packing in order)."""
    # 1. the whole replica on one node, the first from the cursor with room
    for i in range(cursor, len(nodes)):
        if nodes[i].gpus - used[nodes[i].name] >= need:
            return [(nodes[i], used[nodes[i].name], need)], i
    # 2. spread over consecutive nodes with free GPUs (a replica wider than a node spans nodes)
    pieces: list[Piece] = []
    remaining = need
    last = cursor
    for i in range(cursor, len(nodes)):
        free = nodes[i].gpus - used[nodes[i].name]
        if free <= 0:
            continue
        take = min(free, remaining)
        pieces.append((nodes[i], used[nodes[i].name], take))
        remaining -= take
        last = i
        if remaining == 0:
            return pieces, last
    # 3. over-subscribed: the rest goes past the end of the role's last node (reported, never raised)
    tail = nodes[-1]
    if pieces and pieces[-1][0].name == tail.name:
        node, base, count = pieces.pop()
        pieces.append((node, base, count + remaining))
    else:
        pieces.append((tail, max(used[tail.name], tail.gpus), remaining))
    return pieces, len(nodes) - 1


def _place_on_types(need: int, nodes: list[Node]) -> list[Piece]:
    """Pods for one replica of `need` GPUs on node TYPES: the first type that holds it whole gives one pod;
    else the fewest pods of equal size that fit the widest type, each a fresh machine (types in order)."""
    for node in nodes:
        if node.gpus >= need:
            return [(node, 0, need)]
    widest = max(n.gpus for n in nodes)
    pods = next(k for k in range(-(-need // widest), need + 1) if need % k == 0 and need // k <= widest)
    fits = [n for n in nodes if n.gpus >= need // pods]
    return [(fits[i % len(fits)], 0, need // pods) for i in range(pods)]


def place(topo: Topology) -> list[ReplicaPlacement]:
    """Every replica of each role in `topo.roles()` order (prefill then decode, or the colocated replicas),
    packed on the role's nodes in order; roles sharing a machine get disjoint GPU ranges (prefill first),
    also when they name it through different nodes (127.0.0.1 and localhost). Raises nothing; see
    placement_problems(). Roles on Kubernetes node types: see the module docstring."""
    used = _MachineGpus(topo)
    out: list[ReplicaPlacement] = []
    for role in topo.roles():
        nodes = [topo.node(n) for n in role.nodes]
        need = role.gpus_per_replica
        cursor = 0
        types = all(is_node_type(topo, n) for n in nodes)
        for replica in range(role.replicas):
            if types:
                pieces = _place_on_types(need, nodes)
            else:
                pieces, cursor = _place_replica(need, nodes, used, cursor)
            slots = []
            for rank, (node, base, count) in enumerate(pieces):
                slots.append(NodeSlot(node.name, node.address, base, count, rank))
                if not types:
                    used[node.name] = max(used[node.name], base + count)
            http_port = role.port + replica
            first_host = host_for_url(slots[0].host)
            out.append(ReplicaPlacement(
                role=role.name,
                replica=replica,
                http_port=http_port,
                bootstrap_port=bootstrap_port_of(topo, role.name, replica),
                slots=slots,
                nnodes=len(slots),
                dist_init_addr=f"{first_host}:{dist_init_port(http_port)}" if len(slots) > 1 else None,
                url=f"http://{first_host}:{http_port}",
            ))
    return out


def _role_capacity_message(topo: Topology, role: RoleConfig, placements: list[ReplicaPlacement]) -> str:
    need = role.replicas * role.gpus_per_replica
    capacity = sum(topo.node(n).gpus for n in role.nodes)
    machines = {machine_key(topo.node(n)) for n in role.nodes}
    taken_by_others = 0
    for p in placements:
        if p.role != role.name:
            taken_by_others += sum(s.num_gpus for s in p.slots if machine_key(topo.node(s.node)) in machines and
                                   s.base_gpu_id + s.num_gpus <= topo.node(s.node).gpus)
    unit = "rank slots" if all(topo.node(n).gpu == "cpu" for n in role.nodes) else "GPUs"
    shared = f", {taken_by_others} of them used by the other role" if taken_by_others else ""
    return (f"{role.name}: {role.replicas} replica(s) x tp {role.tp} x pp {role.pp} need {need} {unit}, "
            f"but nodes {', '.join(role.nodes)} have {capacity}{shared}")


def placement_problems(topo: Topology, placements: list[ReplicaPlacement] | None = None) -> list[str]:
    """What is wrong with the placement, in plain words: over-subscription, overlapping GPUs,
    multi-node replicas with unequal GPUs per node. Empty = placement is sound."""
    placements = place(topo) if placements is None else placements
    problems: list[str] = []
    for role in topo.roles():
        mine = [p for p in placements if p.role == role.name]
        if any(s.base_gpu_id + s.num_gpus > topo.node(s.node).gpus for p in mine for s in p.slots):
            problems.append(_role_capacity_message(topo, role, placements))
        for p in mine:
            counts = {s.num_gpus for s in p.slots}
            if p.nnodes > 1 and len(counts) > 1:
                parts = ", ".join(f"{s.node} ({s.num_gpus})" for s in p.slots)
                problems.append(f"{p.name} spans {p.nnodes} nodes with unequal GPU counts: {parts}; SGLang "
                                f"multi-node needs tp x pp / nnodes GPUs on every node")
    owner: dict[tuple[str, int], str] = {}
    overlaps: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for p in placements:
        for s in p.slots:
            if is_node_type(topo, topo.node(s.node)):
                continue  # every pod on a node type gets its own GPUs from the device plugin
            machine = machine_key(topo.node(s.node))
            for gpu in range(s.base_gpu_id, s.base_gpu_id + s.num_gpus):
                other = owner.setdefault((machine, gpu), p.name)
                if other != p.name:
                    overlaps[(s.node, other, p.name)].append(gpu)
    for (node, a, b), gpus in overlaps.items():
        problems.append(f"{a} and {b} both use GPU(s) {', '.join(map(str, gpus))} on node {node}")
    return problems + _machine_disagreements(topo)


def _machine_disagreements(topo: Topology) -> list[str]:
    """Nodes that are one machine must describe it the same way (GPU kind and count)."""
    seen: dict[str, Node] = {}
    out = []
    for node in topo.nodes:
        first = seen.setdefault(machine_key(node), node)
        if first is not node and (first.gpu, first.gpus) != (node.gpu, node.gpus):
            out.append(f"nodes {first.name} ({first.target}) and {node.name} ({node.target}) are one machine but "
                       f"say {first.gpus} x {first.gpu} and {node.gpus} x {node.gpu}")
    return out


def port_bindings(
    topo: Topology, placements: list[ReplicaPlacement] | None = None
) -> list[tuple[str, int, str]]:
    """Every (node, port, what) a launch would bind: replica HTTP ports, prefill bootstrap servers,
    multi-node rendezvous ports, the router and its metrics. Decode only connects to bootstrap ports, so binds
    none; colocated replicas have no bootstrap server."""
    placements = place(topo) if placements is None else placements
    out: list[tuple[str, int, str]] = []
    for p in placements:
        head = p.slots[0].node
        out.append((head, p.http_port, f"{p.name} http"))
        if p.role == "prefill":
            out.append((head, p.bootstrap_port, f"{p.name} bootstrap"))
        if p.dist_init_addr is not None:
            out.append((head, int(p.dist_init_addr.rsplit(":", 1)[1]), f"{p.name} dist-init"))
    out.append((topo.router_node.name, topo.router.port, "router"))
    if topo.router.metrics_port is not None:
        out.append((topo.router_node.name, topo.router.metrics_port, "router metrics"))
    return out


def port_clashes(topo: Topology, placements: list[ReplicaPlacement] | None = None) -> list[str]:
    """Port bindings that collide on one machine (nodes sharing a host are the same machine)."""
    by_port: dict[tuple[str, int], list[tuple[str, str]]] = defaultdict(list)
    for node, port, what in port_bindings(topo, placements):
        by_port[(machine_key(topo.node(node)), port)].append((node, what))
    problems = []
    for (machine, port), users in by_port.items():
        if len(users) > 1:
            names = " and ".join(f"{what} (node {node})" for node, what in users)
            problems.append(f"port {port} on {machine} is bound by {names}")
    return problems
