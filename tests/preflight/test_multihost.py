"""`pdctl preflight` against three namespaced hosts (tests/support/multihost.py) reached over their sshds: it
passes on a sound topology (a real KV transfer from host a to host b over the bridge), and fails for real — with
the node, the fact and the fix — when host b lacks the model directory, when a port is taken on host a, when host
b runs another pdctl in its engine environment, and when a node cannot be reached. Hosts may also be names that
only the nodes resolve."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.launch_e2e import pdctl
from tests.support.multihost import hosts_with_checkpoint, other_pdctl_env, pd_topology
from tests.support.net import wait_for
from tests.support.netns import netns_missing_reason
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    with hosts_with_checkpoint(tmp_path_factory.mktemp("preflight-hosts")) as hosts:
        yield hosts


def _preflight(hosts: dict, topo: Path, *extra: str) -> tuple[int, dict, str]:
    done = pdctl("preflight", str(topo), "--json", "-", "--tokens", "256", *extra, cwd=hosts["tmp"], timeout=300)
    return done.returncode, json.loads(done.stdout), done.stderr


def _failed(doc: dict) -> dict[str, list[str]]:
    """node -> ids of its failed error checks."""
    return {n["node"]: [c["check"] for c in n["checks"] if not c["ok"] and c["severity"] == "error"]
            for n in doc["nodes"] if any(not c["ok"] and c["severity"] == "error" for c in n["checks"])}


def test_passes_and_moves_kv_between_hosts(hosts: dict) -> None:
    mh = hosts["mh"]
    topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="nixl", name="pf-ok")
    before = mh["b"].iface_bytes()
    started = time.monotonic()
    code, doc, err = _preflight(hosts, topo)
    wall = time.monotonic() - started
    assert code == 0 and doc["ok"], err[-3000:]
    assert _failed(doc) == {}
    (transfer,) = doc["transfers"]
    assert (transfer["from"], transfer["to"], transfer["verified"]) == ("pa", "db", True)
    assert transfer["transport"].startswith("tcp/pd0") and transfer["crosses_nodes"] is True
    assert transfer["gbps"] > 0 and transfer["us_per_descriptor"] > 0
    assert mh["b"].iface_bytes()[0] - before[0] >= transfer["bytes"]  # the bytes came in over host b's veth
    checks = {(n["node"], c["check"]): c for n in doc["nodes"] for c in n["checks"]}
    ucx = checks[("db", "ucx.transports")]  # where UCX's tools are installed, it lists tcp/pd0; else says so
    assert (ucx["ok"] and ucx["found"] == ["tcp/pd0"]) or (ucx["severity"] == "warning" and "ucx_info" in ucx["message"])
    hostnames = {n["node"]: n["facts"]["hostname"] for n in doc["nodes"]}
    assert hostnames == {"pa": mh["a"].hostname, "db": mh["b"].hostname, "rc": mh["c"].hostname}
    print(f"\npreflight of a 3-host topology: {wall:.1f}s wall (report: {doc['wall_s']:.1f}s); transfer "
          f"{transfer['gbps']:.4f} GB/s, {transfer['us_per_descriptor']:.1f} us/descriptor over {transfer['transport']}")


def test_fails_when_host_b_lacks_the_model(hosts: dict) -> None:
    mh = hosts["mh"]
    topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="mooncake", name="pf-nomodel")
    mh.hide("b", hosts["models"])
    try:
        code, doc, err = _preflight(hosts, topo, "--skip-transfer")
    finally:
        mh["b"].unbind(hosts["models"])
    assert code == 1 and not doc["ok"]
    assert _failed(doc) == {"db": ["model.path"]}, _failed(doc)
    assert f"model directory {hosts['checkpoint']} does not exist" in err


def test_fails_when_a_port_is_taken_on_host_a(hosts: dict) -> None:
    mh = hosts["mh"]
    topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="nixl", name="pf-port")
    code = (f"import socket, time\ns = socket.socket(); s.bind(({mh['a'].address!r}, 30000)); s.listen(); "
            "print('bound', flush=True); time.sleep(600)")
    holder = mh["a"].popen(["python3", "-c", code], hosts["tmp"] / "holder.log")
    try:
        wait_for(lambda: "bound" in (hosts["tmp"] / "holder.log").read_text(), timeout=30, what="port holder")
        code, doc, err = _preflight(hosts, topo, "--skip-transfer")
    finally:
        holder.kill()
        holder.wait(timeout=10)
    assert code == 1
    assert _failed(doc) == {"pa": ["port"]}, _failed(doc)
    assert f"{mh['a'].address}:30000 (prefill[0] http) is already in use" in err


def test_fails_when_host_b_runs_another_pdctl(hosts: dict) -> None:
    mh = hosts["mh"]
    topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="nixl", name="pf-version")
    env = other_pdctl_env(hosts["tmp"], "0.0.9")
    mh.use_env("b", env)
    try:
        code, doc, err = _preflight(hosts, topo, "--skip-transfer")
    finally:
        mh.restore_env("b")
    assert code == 1
    assert set(_failed(doc)) == {"db"} and "versions.pdctl" in _failed(doc)["db"], _failed(doc)
    assert "pdctl 0.0.9 in" in err and "versions.same.pdctl" in _failed(doc)["db"]


def test_fails_clearly_on_an_unreachable_node(hosts: dict) -> None:
    mh = hosts["mh"]
    router = mh.node("c", "rc")
    router["ssh"]["port"] = 2222  # nothing listens there on host c: connection refused
    topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="nixl", name="pf-unreachable",
                       nodes=[mh.node("a", "pa"), mh.node("b", "db"), router])
    code, doc, err = _preflight(hosts, topo, "--skip-transfer")
    assert code == 1
    assert _failed(doc) == {"rc": ["reach"]}, _failed(doc)
    assert "ssh failed" in err and "Connection refused" in err


def test_hosts_may_be_names_resolved_on_the_nodes(hosts: dict) -> None:
    """host: the node's hostname, which only the hosts resolve (their /etc/hosts); ssh reaches it through
    HostName (as ~/.ssh/config would); every node resolves its peers by name."""
    mh = hosts["mh"]
    nodes = []
    for letter, name in (("a", "pa"), ("b", "db"), ("c", "rc")):
        node = mh.node(letter, name)
        node["host"] = mh[letter].hostname
        node["ssh"]["options"]["HostName"] = mh[letter].address
        nodes.append(node)
    topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="nixl", name="pf-names", nodes=nodes)
    code, doc, err = _preflight(hosts, topo, "--skip-transfer")
    assert code == 0, err[-3000:]
    checks = {(n["node"], c["check"]): c for n in doc["nodes"] for c in n["checks"]}
    assert checks[("pa", "address")]["message"] == f"advertises {mh['a'].hostname} = {mh['a'].address}"
    peer = next(c for (node, cid), c in checks.items() if node == "db" and cid == "reach.peer")
    assert peer["message"].startswith(f"{mh['a'].hostname} via pd0")
