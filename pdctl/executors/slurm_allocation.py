"""Inside a Slurm allocation: which of the job's nodes each topology node is, and which address it advertises.

`scontrol show hostnames "$SLURM_JOB_NODELIST"` lists the job's nodes in Slurm's order; nodes that name a host
keep it (it must be one of the job's), nodes without host take the remaining job nodes in order. Each node
that does not write advertise_host is then asked, through one srun step per node, for its address: the IPv4
address of slurm.network_interface; else the address its hostname resolves to on the node; a loopback answer
is only taken when the whole deployment is on one node (else the source address of its default route, as
srtctl falls back to). The result is an ordinary topology with every host and address known, which the rest
of launch (check-compat, preflight, render) takes as it takes any other.
"""

from __future__ import annotations

import os
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pdctl.errors import CheckFailed, UserError
from pdctl.executors.base import CommandResult
from pdctl.executors.local import run_captured
from pdctl.executors.slurm import SlurmExecutor, node_step
from pdctl.render.slurm import OWN_JOB_ENV, in_allocation, slurm_target
from pdctl.topology.placement import is_loopback

if TYPE_CHECKING:
    from pdctl.topology import Node, Topology

ADDRESS_TIMEOUT_S = 120.0
MARK = "@@pdctl-address"
# Run on each node: its Slurm name, the address of an interface ($1), what its hostname resolves to, and the
# source address of its default route (`ip route get` only consults the routing table: nothing is sent).
ADDRESS_SCRIPT = r"""name=${SLURMD_NODENAME:-$(hostname)}
iface=""; [ -n "$1" ] && iface=$(ip -o -4 addr show dev "$1" 2>/dev/null | awk '{split($4, a, "/"); print a[1]; exit}')
resolved=$(getent ahostsv4 "$(hostname)" 2>/dev/null | awk '{print $1; exit}')
route=$(ip -o -4 route get 192.0.2.1 2>/dev/null | awk '{for (i = 1; i < NF; i++) if ($i == "src") {print $(i + 1); exit}}')
echo "@@pdctl-address name=$name iface=${iface:--} resolved=${resolved:--} route=${route:--}"
"""


def require_allocation() -> str:
    """The job id of the allocation this process runs in; UserError outside one."""
    if not in_allocation():
        raise UserError("--in-allocation runs inside a Slurm allocation (salloc, or an sbatch job): SLURM_JOB_ID "
                        "is not set here; use `pdctl launch TOPOLOGY --submit` to have pdctl sbatch the job")
    return os.environ["SLURM_JOB_ID"]


def job_hostnames() -> list[str]:
    """The job's nodes in Slurm's order (scontrol show hostnames $SLURM_JOB_NODELIST)."""
    nodelist = os.environ.get("SLURM_JOB_NODELIST") or os.environ.get("SLURM_NODELIST") or ""
    if not nodelist:
        raise UserError("SLURM_JOB_NODELIST is not set: not inside a Slurm allocation?")
    done = run_captured(["scontrol", "show", "hostnames", nodelist], timeout=30)
    names = done.stdout.split()
    if done.returncode != 0 or not names:
        raise CheckFailed(f"scontrol show hostnames {nodelist} failed (exit {done.returncode})",
                          detail=(done.stderr or done.stdout).strip())
    return names


def assign(topo: Topology, hostnames: list[str]) -> dict[str, str]:
    """Topology node -> job node: named nodes keep their host (which must be a job node), the others take the
    job nodes no named node uses, in order. UserError when the job is too small or lacks a named node."""
    out: dict[str, str] = {}
    for node in topo.nodes:
        if not node.allocated:
            host = slurm_target(node)
            if host not in hostnames:
                raise UserError(f"node {node.name}: host {host} is not one of this job's nodes "
                                f"({', '.join(hostnames)})")
            out[node.name] = host
    free = [h for h in hostnames if h not in set(out.values())]
    wanted = [n for n in topo.nodes if n.allocated]
    if len(wanted) > len(free):
        raise UserError(f"the topology needs {len(wanted)} node(s) from the job besides the named ones, but the job "
                        f"has {len(free)} more ({', '.join(hostnames)}): ask for more nodes (salloc --nodes)")
    out.update({node.name: host for node, host in zip(wanted, free)})
    return out


@dataclass(frozen=True)
class AddressReport:
    """What one node said about its addresses ('-' = nothing)."""

    name: str
    iface: str
    resolved: str
    route: str


def parse_reports(text: str) -> dict[str, AddressReport]:
    """The ADDRESS_SCRIPT lines of an srun's output, by Slurm node name."""
    out: dict[str, AddressReport] = {}
    for line in text.splitlines():
        if not line.startswith(MARK):
            continue
        fields = dict(part.split("=", 1) for part in line[len(MARK):].split() if "=" in part)
        report = AddressReport(fields.get("name", ""), fields.get("iface", "-"), fields.get("resolved", "-"),
                               fields.get("route", "-"))
        out[report.name] = report
    return out


def choose_address(report: AddressReport, *, interface: str | None, one_machine: bool) -> str:
    """The address a node advertises (see the module docstring); UserError saying what to set otherwise."""
    if interface:
        if report.iface == "-":
            raise UserError(f"node {report.name} has no IPv4 address on slurm.network_interface {interface}")
        return report.iface
    if report.resolved != "-" and (not is_loopback(report.resolved) or one_machine):
        return report.resolved
    if report.route != "-" and not is_loopback(report.route):
        return report.route
    raise UserError(f"node {report.name}: cannot tell which address to advertise (its hostname resolves to "
                    f"{report.resolved}, no default route): set slurm.network_interface")


def node_addresses(topo: Topology, hosts: list[str], *, one_machine: bool) -> dict[str, str]:
    """Job node -> the address it advertises, read on the nodes HOSTS with one srun (one task per node)."""
    if not hosts:
        return {}
    interface = topo.slurm.network_interface if topo.slurm else None
    argv = ["srun", f"--nodes={len(hosts)}", f"--ntasks={len(hosts)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(hosts)}", "--overlap", "--quiet", "--job-name=pdctl-addresses",
            "bash", "-c", ADDRESS_SCRIPT, "pdctl-addresses", interface or ""]
    done = run_captured(argv, timeout=ADDRESS_TIMEOUT_S)
    reports = parse_reports(done.stdout)
    missing = [h for h in hosts if h not in reports]
    if missing:
        raise CheckFailed(f"could not read the address of job node(s) {', '.join(missing)} through srun "
                          f"(exit {done.returncode})", detail=f"{shlex.join(argv[:8])} ...\n{done.stderr.strip()}")
    return {h: choose_address(reports[h], interface=interface, one_machine=one_machine) for h in hosts}


def bind(topo: Topology, hosts: dict[str, str], addresses: dict[str, str]) -> Topology:
    """TOPO with each node's host set to its job node (HOSTS: node -> job node) and advertise_host to the
    address read there (ADDRESSES: job node -> address) where the topology did not write one."""
    nodes = []
    for node in topo.nodes:
        host = hosts[node.name]
        update: dict[str, str | None] = {"host": host}
        if node.advertise_host is None and host in addresses:
            update["advertise_host"] = addresses[host]
        nodes.append(node.model_copy(update=update))
    return topo.model_copy(update={"nodes": nodes})


def bind_allocation(topo: Topology) -> Topology:
    """TOPO with every node on a node of the allocation this process runs in, with its address."""
    require_allocation()
    hosts = assign(topo, job_hostnames())
    asking = list(dict.fromkeys(hosts[n.name] for n in topo.nodes if n.advertise_host is None))
    addresses = node_addresses(topo, asking, one_machine=len(set(hosts.values())) == 1)
    return bind(topo, hosts, addresses)


def slurm_nodes(topo: Topology) -> Topology:
    """TOPO ready to be reached through srun from here (`pdctl preflight` of a Slurm topology): bound to the
    allocation this process runs in when it has one or when a node has no host; a node without host outside
    any allocation is bad input (it only exists in a job)."""
    if in_allocation():
        return bind_allocation(topo)
    unknown = [n.name for n in topo.nodes if n.allocated]
    if unknown:
        raise UserError(f"node(s) {', '.join(unknown)} have no host: a Slurm job assigns them; run this inside an "
                        "allocation (salloc), where they are its nodes (`pdctl launch --submit` runs preflight in "
                        "its job)")
    return topo


def prepare_containers(topo: Topology, *, timeout: float) -> None:
    """With engine.container: create the deployment's named pyxis container on every node first, one step per
    node (nodes in parallel), so that the image is imported once per node before any server starts, instead
    of by several steps of one node racing to create it. CheckFailed names a node where it fails."""
    container = topo.engine.container
    if container is None:
        return
    nodes = list({n.target: n for n in topo.nodes}.values())

    def create(node: Node) -> tuple[str, CommandResult]:
        return node.name, SlurmExecutor(node=node.target, wrap=node_step(topo, node)).run(["true"], timeout=timeout)

    with ThreadPoolExecutor(max_workers=min(16, len(nodes))) as pool:
        for name, done in pool.map(create, nodes):
            if done.returncode != 0:
                why = "no answer within the timeout" if done.returncode is None else f"exit {done.returncode}"
                raise CheckFailed(f"could not create the container {container.image} on node {name} ({why})",
                                  detail=(done.stderr or done.stdout).strip()[-2000:])


def enter_allocation(topo: Topology, *, timeout: float) -> tuple[Topology, dict[str, Any]]:
    """`pdctl launch --in-allocation`: TOPO bound to the allocation this process runs in (its containers
    created on every node first), and the state document's fields that say so (the job, whether pdctl
    submitted it, each node's host and address)."""
    job_id = require_allocation()
    topo = bind_allocation(topo)
    prepare_containers(topo, timeout=timeout)  # one pyxis container per node, imported once
    return topo, {"executor": "slurm", "job_id": job_id, "job_owned": os.environ.get(OWN_JOB_ENV) == "1",
                  "nodes": {n.name: {"host": n.host, "advertise": n.address} for n in topo.nodes}}
