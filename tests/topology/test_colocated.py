"""mode: colocated — one plain (non-PD) server role: loading, merged values, placement, mode/section errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.topology import build_topology, load_topology, load_topology_text
from pdctl.topology.placement import place, placement_problems, port_bindings, port_clashes
from tests.support.topologies import COLOCATED, MINIMAL


def _error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "topo.yaml"
    path.write_text(text)
    with pytest.raises(UserError) as info:
        load_topology(path)
    assert info.value.exit_code == 2
    return str(info.value).replace(str(path), "topo.yaml")


def _pos(text: str, needle: str, prefix: str = "") -> str:
    """'line:col' of `needle` on the first line starting with `prefix` that has it, as errors print it."""
    for number, line in enumerate(text.splitlines(), 1):
        if line.startswith(prefix) and needle in line:
            return f"{number}:{line.index(needle) + 1}"
    raise AssertionError(needle)


def test_colocated_roles_and_router_default() -> None:
    topo = load_topology_text(COLOCATED)
    assert topo.mode == "colocated" and not topo.is_pd
    assert topo.prefill is None and topo.decode is None and topo.colocated is not None
    assert topo.roles() == [topo.colocated] and topo.role("colocated") is topo.colocated
    assert topo.colocated.name == "colocated"
    for missing in ("prefill", "decode", "router"):
        with pytest.raises(KeyError):
            topo.role(missing)
    assert topo.router.node == "a" and topo.router_node.host == "10.0.0.1", "first node of the first role"
    assert [n.name for n in topo.role_nodes("colocated")] == ["a", "b"]
    assert topo.transfer.backend == "mooncake", "transfer: is allowed (and ignored) in colocated mode"


def test_pd_mode_is_the_default_and_unchanged() -> None:
    topo = load_topology_text(MINIMAL)
    assert topo.mode == "pd" and topo.is_pd and topo.colocated is None
    assert [r.name for r in topo.roles()] == ["prefill", "decode"]
    assert topo.require_pd("plan") == (topo.prefill, topo.decode)
    explicit = load_topology_text(MINIMAL.replace("name: minimal", "name: minimal\nmode: pd"))
    assert explicit.model_dump() == topo.model_dump()
    with pytest.raises(KeyError):
        topo.role("colocated")


def test_effective_colocated_role_merges_server_defaults() -> None:
    role = load_topology_text(COLOCATED).colocated
    assert role is not None
    assert (role.replicas, role.tp, role.pp, role.dp, role.enable_dp_attention, role.port) == (3, 2, 1, 1, False,
                                                                                              31500)
    assert role.page_size == 32, "server: value where the role wrote nothing"
    assert role.attention_backend is None, "explicit null in colocated: overrides server: fa3"
    assert role.mem_fraction_static == 0.7 and role.kv_cache_dtype == "auto"
    assert role.args == {"enable-metrics": False, "max-running-requests": 64}
    assert role.radix_cache is False, "a colocated server has no PD decode radix-cache flag"
    assert role.attn_tp == 2 and role.gpus_per_replica == 2
    minimal = load_topology_text(COLOCATED.replace("  port: 31500\n", "")).colocated
    assert minimal is not None and minimal.port == 30000


def test_require_pd_names_the_command() -> None:
    topo = load_topology_text(COLOCATED)
    with pytest.raises(UserError, match=r"^plan needs a PD topology .*colocated-example is mode: colocated"):
        topo.require_pd("plan")


def test_colocated_placement_and_ports() -> None:
    topo = load_topology_text(COLOCATED)
    placements = place(topo)
    got = [(p.name, p.role, p.http_port, p.bootstrap_port, p.url,
            [(s.node, s.base_gpu_id, s.num_gpus) for s in p.slots]) for p in placements]
    assert got == [
        ("colocated[0]", "colocated", 31500, 0, "http://10.0.0.1:31500", [("a", 0, 2)]),
        ("colocated[1]", "colocated", 31501, 0, "http://10.0.0.1:31501", [("a", 2, 2)]),
        ("colocated[2]", "colocated", 31502, 0, "http://10.0.0.2:31502", [("b", 0, 2)]),
    ]
    assert placement_problems(topo) == []
    assert sorted(port_bindings(topo)) == sorted([
        ("a", 31500, "colocated[0] http"), ("a", 31501, "colocated[1] http"), ("b", 31502, "colocated[2] http"),
        ("a", 8000, "router"), ("a", 8001, "router metrics"),
    ]), "no bootstrap ports in colocated mode"
    assert port_clashes(topo) == []


def test_colocated_multi_node_replica_and_over_subscription() -> None:
    wide = load_topology_text(COLOCATED.replace("replicas: 3\n  tp: 2", "tp: 4\n  pp: 2"))
    (replica,) = place(wide)
    assert replica.nnodes == 2 and replica.dist_init_addr == "10.0.0.1:32500"
    assert ("a", 32500, "colocated[0] dist-init") in port_bindings(wide)
    assert placement_problems(wide) == []
    full = load_topology_text(COLOCATED.replace("replicas: 3", "replicas: 5"))
    assert placement_problems(full) == [
        "colocated: 5 replica(s) x tp 2 x pp 1 need 10 GPUs, but nodes a, b have 8"]


def test_router_port_clash_in_colocated_mode() -> None:
    topo = load_topology_text(COLOCATED + "router:\n  port: 31501\n")
    assert port_clashes(topo) == [
        "port 31501 on 10.0.0.1 is bound by colocated[1] http (node a) and router (node a)"]


def test_prefill_and_decode_are_errors_in_colocated_mode(tmp_path: Path) -> None:
    text = COLOCATED + "prefill:\n  nodes: [a]\ndecode: {nodes: [b]}\n"
    msg = _error(tmp_path, text)
    hint = "not allowed with mode: colocated (one colocated: section describes the servers); remove prefill: / " \
           "decode:, or set mode: pd"
    assert msg.splitlines() == [f"topo.yaml:{_pos(text, 'prefill:')}: prefill: {hint}",
                                f"topo.yaml:{_pos(text, 'decode:')}: decode: {hint}"]


def test_colocated_section_missing_points_at_mode(tmp_path: Path) -> None:
    text = COLOCATED.replace("colocated:\n  nodes", "prefill:\n  nodes")
    msg = _error(tmp_path, text)
    assert f"topo.yaml:{_pos(text, 'colocated', 'mode:')}: colocated: required key 'colocated' missing (mode: colocated " \
           "describes its servers in a colocated: section)" in msg
    assert f"topo.yaml:{_pos(text, 'prefill:')}: prefill: not allowed with mode: colocated" in msg


def test_colocated_section_is_an_error_in_pd_mode(tmp_path: Path) -> None:
    text = MINIMAL + "colocated:\n  nodes: [n0]\n"
    msg = _error(tmp_path, text)
    assert msg == (f"topo.yaml:{_pos(text, 'colocated:')}: colocated: only allowed with mode: colocated (this file "
                   "is mode: pd, the default); set mode: colocated and remove prefill: / decode:, or remove "
                   "colocated:")
    explicit = MINIMAL.replace("name: minimal", "name: minimal\nmode: pd") + "colocated:\n  nodes: [n0]\n"
    assert "(this file is mode: pd);" in _error(tmp_path, explicit)
    without_mode = COLOCATED.replace("mode: colocated\n", "")
    msg = _error(tmp_path, without_mode)
    assert msg.startswith("topo.yaml:1:1: prefill: required key 'prefill' missing in (top level)\n"
                          "topo.yaml:1:1: decode: required key 'decode' missing in (top level)\n")
    assert "colocated: only allowed with mode: colocated" in msg


def test_null_sections_and_bad_mode(tmp_path: Path) -> None:
    text = COLOCATED.replace("colocated:\n  nodes: [a, b]", "colocated: null\nx:\n  nodes: [a, b]")
    text = text.split("x:\n")[0]
    assert _error(tmp_path, text) == f"topo.yaml:{_pos(text, 'null')}: colocated: expected a mapping, got null"
    pd_null = MINIMAL.replace("decode:\n  nodes: [n0]", "decode: null")
    assert _error(tmp_path, pd_null).endswith("decode: expected a mapping, got null")
    bad = COLOCATED.replace("mode: colocated", "mode: colocate")
    assert _error(tmp_path, bad) == (f"topo.yaml:{_pos(bad, 'colocate', 'mode:')}: mode: expected one of pd | colocated, "
                                     "got the string 'colocate'; did you mean 'colocated'?")


def test_pd_only_keys_in_colocated_section(tmp_path: Path) -> None:
    text = COLOCATED.replace("  tp: 2\n", "  tp: 2\n  radix_cache: true\n")
    msg = _error(tmp_path, text)
    assert msg.startswith(f"topo.yaml:{_pos(text, 'radix_cache')}: colocated.radix_cache: unknown key "
                          "'radix_cache'; radix_cache is a PD decode key")
    msg = _error(tmp_path, COLOCATED.replace("  tp: 2\n", "  tpp: 2\n"))
    assert "colocated.tpp: unknown key 'tpp'; did you mean 'tp'?" in msg
    msg = _error(tmp_path, COLOCATED.replace("  page_size: 32\n", "  page_size: 32\n  replicas: 2\n"))
    assert "server.replicas: unknown key 'replicas'; replicas is a role key" in msg and "colocated:" in msg


def test_cross_references_in_colocated_section(tmp_path: Path) -> None:
    text = COLOCATED.replace("nodes: [a, b]", "nodes: [a, c, a]").replace(
        "  tp: 2\n", "  tp: 2\n  dp: 3\n  enable_dp_attention: true\n").replace("port: 31500", "port: 65534")
    text += "router:\n  node: bb\n"
    msg = _error(tmp_path, text)
    assert "colocated.nodes[1]: unknown node 'c' (nodes: a, b)" in msg
    assert "colocated.nodes[2]: node 'a' listed twice" in msg
    assert "colocated.dp: dp (3) must divide tp (2) when enable_dp_attention is true" in msg
    assert "colocated.port: ports 65534..65536 of 3 replicas exceed 65535" in msg
    assert "router.node: unknown node 'bb'; did you mean 'b'?" in msg
    assert "bootstrap" not in msg, "no bootstrap ports in colocated mode, whatever transfer: says"


def test_build_topology_from_data() -> None:
    data = {"name": "r", "mode": "colocated", "model": {"path": "m"},
            "nodes": [{"name": "n", "host": "h", "gpu": "cpu", "gpus": 1}], "colocated": {"nodes": ["n"]}}
    topo = build_topology(data)
    assert topo.colocated is not None and topo.colocated.port == 30000 and place(topo)[0].bootstrap_port == 0
    doc = topo.model_dump(mode="json")
    assert doc["mode"] == "colocated" and doc["prefill"] is None and doc["colocated"]["name"] == "colocated"
