"""Placement: packing, multi-node spans, shared nodes, bootstrap ports, over-subscription, port facts."""

from __future__ import annotations

from typing import Any

from pdctl.topology import Topology, build_topology
from pdctl.topology.placement import (
    NodeSlot,
    place,
    placement_problems,
    port_bindings,
    port_clashes,
)


def topo(nodes: list[tuple[str, int]], prefill: dict[str, Any], decode: dict[str, Any], gpu: str = "h100",
         **extra: Any) -> Topology:
    """A topology from (name, gpus) nodes (host 10.0.0.<i>) and role dicts."""
    data = {
        "name": "t", "model": {"path": "m"},
        "nodes": [{"name": n, "host": f"10.0.0.{i + 1}", "gpu": gpu, "gpus": g}
                  for i, (n, g) in enumerate(nodes)],
        "prefill": prefill, "decode": decode, **extra,
    }
    return build_topology(data)


def slots(t: Topology, role: str) -> list[list[tuple[str, int, int, int]]]:
    return [[(s.node, s.base_gpu_id, s.num_gpus, s.node_rank) for s in p.slots]
            for p in place(t) if p.role == role]


def test_replicas_pack_in_node_order() -> None:
    t = topo([("a", 8), ("b", 8)], {"nodes": ["a", "b"], "tp": 4, "replicas": 3}, {"nodes": ["b"], "tp": 2})
    assert slots(t, "prefill") == [[("a", 0, 4, 0)], [("a", 4, 4, 0)], [("b", 0, 4, 0)]]
    assert slots(t, "decode") == [[("b", 4, 2, 0)]]
    assert placement_problems(t) == []


def test_replica_wider_than_a_node_spans_nodes() -> None:
    t = topo([("p0", 4), ("p1", 4), ("d0", 4)], {"nodes": ["p0", "p1"], "tp": 4, "pp": 2},
             {"nodes": ["d0"], "tp": 4})
    (prefill, decode) = place(t)
    assert prefill.nnodes == 2
    assert prefill.slots == [NodeSlot("p0", "10.0.0.1", 0, 4, 0), NodeSlot("p1", "10.0.0.2", 0, 4, 1)]
    assert prefill.dist_init_addr == "10.0.0.1:31000"
    assert prefill.url == "http://10.0.0.1:30000"
    assert decode.nnodes == 1 and decode.dist_init_addr is None
    assert placement_problems(t) == []
    assert ("p0", 31000, "prefill[0] dist-init") in port_bindings(t)


def test_roles_sharing_a_node_get_disjoint_gpus() -> None:
    t = topo([("n", 8)], {"nodes": ["n"], "tp": 2, "replicas": 2}, {"nodes": ["n"], "tp": 4})
    assert slots(t, "prefill") == [[("n", 0, 2, 0)], [("n", 2, 2, 0)]]
    assert slots(t, "decode") == [[("n", 4, 4, 0)]]
    assert placement_problems(t) == []


def test_bootstrap_and_http_ports_per_replica() -> None:
    t = topo([("p", 8), ("d", 8)], {"nodes": ["p"], "replicas": 2, "port": 31000},
             {"nodes": ["d"], "replicas": 3}, transfer={"bootstrap_port": 9000})
    got = [(p.name, p.http_port, p.bootstrap_port, p.url) for p in place(t)]
    assert got == [
        ("prefill[0]", 31000, 9000, "http://10.0.0.1:31000"), ("prefill[1]", 31001, 9001, "http://10.0.0.1:31001"),
        ("decode[0]", 30100, 9000, "http://10.0.0.2:30100"), ("decode[1]", 30101, 9001, "http://10.0.0.2:30101"),
        ("decode[2]", 30102, 9000, "http://10.0.0.2:30102"),
    ]
    assert sorted(port_bindings(t)) == sorted([
        ("p", 31000, "prefill[0] http"), ("p", 9000, "prefill[0] bootstrap"),
        ("p", 31001, "prefill[1] http"), ("p", 9001, "prefill[1] bootstrap"),
        ("d", 30100, "decode[0] http"), ("d", 30101, "decode[1] http"), ("d", 30102, "decode[2] http"),
        ("p", 8000, "router"), ("p", 8001, "router metrics"),
    ])


def test_over_subscription_is_reported_not_raised() -> None:
    t = topo([("n", 8)], {"nodes": ["n"], "tp": 4}, {"nodes": ["n"], "tp": 4, "replicas": 2})
    placements = place(t)
    assert [p.name for p in placements] == ["prefill[0]", "decode[0]", "decode[1]"]
    assert slots(t, "decode")[1] == [("n", 8, 4, 0)], "the surplus lands past the node's last GPU"
    assert placement_problems(t) == [
        ("decode: 2 replica(s) x tp 4 x pp 1 need 8 GPUs, but nodes n have 8, 4 of them used by the "
        "other role")]


def test_cpu_nodes_count_rank_slots() -> None:
    t = topo([("local", 2)], {"nodes": ["local"], "tp": 2}, {"nodes": ["local"], "tp": 1}, gpu="cpu")
    problems = placement_problems(t)
    assert problems == [("decode: 1 replica(s) x tp 1 x pp 1 need 1 rank slots, but nodes local have 2, "
                         "2 of them used by the other role")]


def test_unequal_multi_node_span_is_a_problem() -> None:
    t = topo([("a", 4), ("b", 2), ("c", 8)], {"nodes": ["a", "b"], "tp": 6}, {"nodes": ["c"], "tp": 8})
    assert slots(t, "prefill") == [[("a", 0, 4, 0), ("b", 0, 2, 1)]]
    assert placement_problems(t) == [
        ("prefill[0] spans 2 nodes with unequal GPU counts: a (4), b (2); SGLang multi-node needs tp x pp / "
        "nnodes GPUs on every node")]


def test_overlapping_gpus_are_reported() -> None:
    t = topo([("n", 8)], {"nodes": ["n"], "tp": 4}, {"nodes": ["n"], "tp": 4})
    placements = place(t)
    clash = [placements[0], type(placements[1])(**{**placements[1].__dict__, "slots": placements[0].slots})]
    assert placement_problems(t, clash) == ["prefill[0] and decode[0] both use GPU(s) 0, 1, 2, 3 on node n"]


def test_port_clashes_group_nodes_by_host() -> None:
    data = {
        "name": "t", "model": {"path": "m"},
        "nodes": [{"name": "p", "host": "127.0.0.1", "gpu": "cpu", "gpus": 2},
                  {"name": "d", "host": "localhost", "gpu": "cpu", "gpus": 2}],
        "prefill": {"nodes": ["p"], "port": 8998}, "decode": {"nodes": ["d"], "port": 8000},
    }
    clashes = port_clashes(build_topology(data))
    assert clashes == [
        "port 8998 on localhost is bound by prefill[0] http (node p) and prefill[0] bootstrap (node p)",
        "port 8000 on localhost is bound by decode[0] http (node d) and router (node p)",
    ]


def test_ipv6_hosts_are_bracketed_in_urls() -> None:
    data = {"name": "t", "model": {"path": "m"},
            "nodes": [{"name": "a", "host": "fd00::1", "gpu": "h100", "gpus": 2},
                      {"name": "b", "host": "fd00::2", "gpu": "h100", "gpus": 2}],
            "prefill": {"nodes": ["a", "b"], "tp": 4}, "decode": {"nodes": ["a"], "tp": 1}}
    t = build_topology(data)
    prefill = place(t)[0]
    assert prefill.url == "http://[fd00::1]:30000" and prefill.dist_init_addr == "[fd00::1]:31000"


def test_loopback_spellings_and_equal_hosts_are_one_machine() -> None:
    from pdctl.topology import load_topology_text
    from pdctl.topology.placement import machine_key, place, placement_problems

    text = """
name: one-machine
model: {path: openai/gpt-oss-20b}
nodes:
  - {name: a, host: 127.0.0.1, gpu: h100, gpus: 4}
  - {name: b, host: localhost, gpu: h100, gpus: 4}
prefill: {nodes: [a], tp: 2}
decode: {nodes: [b], tp: 2, port: 30100}
"""
    topo = load_topology_text(text)
    assert machine_key(topo.node("a")) == machine_key(topo.node("b")) == "localhost"
    prefill, decode = place(topo)
    assert (prefill.slots[0].base_gpu_id, decode.slots[0].base_gpu_id) == (0, 2)  # not both on GPUs 0-1
    assert placement_problems(topo) == []
    full = load_topology_text(text.replace("tp: 2}\ndecode", "tp: 4}\ndecode"))
    assert placement_problems(full) == [
        "decode: 1 replica(s) x tp 2 x pp 1 need 2 GPUs, but nodes b have 4, 4 of them used by the other role"]
    differ = load_topology_text(text.replace("{name: b, host: localhost, gpu: h100, gpus: 4}",
                                             "{name: b, host: LOCALHOST, gpu: h100, gpus: 8}"))
    assert any("are one machine but say 4 x h100 and 8 x h100" in p for p in placement_problems(differ))


def k8s(prefill: dict[str, Any], decode: dict[str, Any], host: str | None = None,
        gpus: int = 4) -> Topology:
    """Nodes p0/d0 of GPUS on Kubernetes: node types without host (the shipped example), or pinned to HOST."""
    pin = {"host": host} if host else {}
    data = {
        "name": "t", "model": {"path": "m"}, "kubernetes": {"image": "lmsysorg/sglang:v0.5.23-cu129"},
        "nodes": [{"name": n, "gpu": "gb300", "gpus": gpus, **pin} for n in ("p0", "d0")],
        "prefill": {"nodes": ["p0"], **prefill}, "decode": {"nodes": ["d0"], **decode},
    }
    if host:
        data["nodes"][1]["host"] = f"{host}-d"
    return build_topology(data)


def test_kubernetes_node_types_scale_replicas_across_machines() -> None:
    # issue 36: prefill TP2 x 3 and decode TP4 x 2 on the Kubernetes example's 4-GPU node types were refused
    # ("need 6 GPUs, but nodes p0 have 4"): a type stands for as many machines as the replicas need
    t = k8s({"tp": 2, "replicas": 3}, {"tp": 4, "replicas": 2})
    assert slots(t, "prefill") == [[("p0", 0, 2, 0)]] * 3  # one pod of 2 GPUs per replica
    assert slots(t, "decode") == [[("d0", 0, 4, 0)]] * 2
    assert placement_problems(t) == []


def test_kubernetes_replica_wider_than_its_type_spans_equal_pods() -> None:
    t = k8s({"tp": 2}, {"tp": 8, "replicas": 2})
    assert slots(t, "decode") == [[("d0", 0, 4, 0), ("d0", 0, 4, 1)]] * 2  # 2 pods x 4 GPUs per replica
    assert place(t)[1].nnodes == 2
    t = k8s({"tp": 2}, {"tp": 6})
    assert slots(t, "decode") == [[("d0", 0, 3, 0), ("d0", 0, 3, 1)]]  # tp x pp / nnodes GPUs on every pod
    assert placement_problems(t) == []


def test_kubernetes_machines_pinned_by_host_are_still_over_subscribed() -> None:
    # a node WITH host is one machine, on Kubernetes too: 3 x tp 2 on its 4 GPUs is a real over-subscription
    t = k8s({"tp": 2, "replicas": 3}, {"tp": 4, "replicas": 2}, host="gpu-a")
    assert placement_problems(t) == [
        "prefill: 3 replica(s) x tp 2 x pp 1 need 6 GPUs, but nodes p0 have 4",
        "decode: 2 replica(s) x tp 4 x pp 1 need 8 GPUs, but nodes d0 have 4",
    ]
