"""Bad topology files: each problem is a UserError naming file:line:col, key path and what was expected."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.topology import build_topology, load_topology, load_topology_text
from tests.support.topologies import FULL, MINIMAL


def _error(tmp_path: Path, text: str | bytes) -> str:
    path = tmp_path / "topo.yaml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    with pytest.raises(UserError) as info:
        load_topology(path)
    assert info.value.exit_code == 2
    return str(info.value).replace(str(path), "topo.yaml")


def _line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_unknown_key_has_position_path_and_did_you_mean(tmp_path: Path) -> None:
    text = MINIMAL.replace("decode:\n  nodes: [n0]", "decode:\n  nodes: [n0]\n  tpp: 2")
    msg = _error(tmp_path, text)
    assert msg == f"topo.yaml:{_line_of(text, 'tpp')}:3: decode.tpp: unknown key 'tpp'; did you mean 'tp'?"


def test_unknown_top_level_and_server_keys(tmp_path: Path) -> None:
    text = MINIMAL + "servr:\n  page_size: 16\n"
    assert "servr: unknown key 'servr'; did you mean 'server'?" in _error(tmp_path, text)
    text = MINIMAL + "server:\n  pagesize: 16\n"
    assert "server.pagesize: unknown key 'pagesize'; did you mean 'page_size'?" in _error(tmp_path, text)
    text = MINIMAL.replace("gpus: 8", "gpus: 8\n    ssh: {user: u, prot: 22}")
    assert "nodes[0].ssh.prot: unknown key 'prot'; did you mean 'port'?" in _error(tmp_path, text)
    text = MINIMAL + "server:\n  tp: 2\n"
    assert "server.tp: unknown key 'tp'; tp is a role key: set it under prefill: and/or decode:" in _error(
        tmp_path, text)
    text = MINIMAL + "server:\n  zzz: 16\n"
    assert "expected one of: page_size, kv_cache_dtype" in _error(tmp_path, text)


def test_wrong_enum_value_suggests(tmp_path: Path) -> None:
    text = MINIMAL.replace("gpu: h100", "gpu: h10")
    msg = _error(tmp_path, text)
    line = _line_of(text, "gpu: h10")
    assert msg.startswith(f"topo.yaml:{line}:10: nodes[0].gpu: expected one of gb300 | gb200 | b200 | h200 | "
                          f"h100 | cpu, got the string 'h10'; did you mean 'h100'?")


def test_wrong_types_are_not_coerced(tmp_path: Path) -> None:
    text = MINIMAL.replace("gpus: 8", "gpus: '8'") + "engine:\n  version: 0.5\n"
    msg = _error(tmp_path, text)
    assert re.search(r"topo\.yaml:\d+:11: nodes\[0\]\.gpus: expected an integer, got the string '8'", msg)
    assert 'engine.version: expected a string, got the number 0.5 (quote it: "0.5")' in msg
    msg = _error(tmp_path, MINIMAL.replace("name: minimal", "name: 2024-01-02"))
    assert 'name: expected a string, got the date 2024-01-02 (quote it: "2024-01-02")' in msg
    text = MINIMAL.replace("decode:\n  nodes: [n0]", "decode:\n  nodes: [n0]\n  radix_cache: yes please")
    msg = _error(tmp_path, text)
    assert "decode.radix_cache: expected true or false, got the string 'yes please'" in msg


def test_bounds_and_patterns(tmp_path: Path) -> None:
    text = MINIMAL.replace("name: minimal", "name: Bad_Name").replace(
        "decode:\n  nodes: [n0]", "decode:\n  nodes: [n0]\n  tp: 0\n  port: 70000")
    msg = _error(tmp_path, text)
    assert "name: expected a name matching ^[a-z0-9][a-z0-9-]*$, got the string 'Bad_Name'" in msg
    assert "decode.tp: expected a value >= 1, got the integer 0" in msg
    assert "decode.port: expected a value <= 65535, got the integer 70000" in msg
    assert len(msg.splitlines()) == 3, "all errors are reported at once"


def test_missing_keys(tmp_path: Path) -> None:
    msg = _error(tmp_path, "name: x\nmodel: {}\nnodes: [{name: a, host: h, gpu: cpu, gpus: 1}]\n"
                           "prefill: {nodes: [a]}\n")
    assert "topo.yaml:1:1: decode: required key 'decode' missing in (top level)" in msg
    assert "topo.yaml:2:8: model.path: required key 'path' missing in model" in msg


def test_cross_references(tmp_path: Path) -> None:
    text = MINIMAL.replace("prefill:\n  nodes: [n0]", "prefill:\n  nodes: [n0x, n0, n0]\n  tp: 4\n  dp: 3\n"
                           "  enable_dp_attention: true") + "router:\n  node: N0\n" + (
        "  - {name: n0, host: h, gpu: h100, gpus: 1}\n")
    text = text.replace("    gpus: 8\n", "    gpus: 8\n  - {name: n0, host: h2, gpu: h100, gpus: 1}\n")
    msg = _error(tmp_path, text.replace("router:\n  node: N0\n  - {name: n0, host: h, gpu: h100, gpus: 1}\n",
                                        "router:\n  node: N0\n"))
    assert "nodes[1].name: duplicate node name 'n0' (also nodes[0])" in msg
    assert "prefill.nodes[0]: unknown node 'n0x'; did you mean 'n0'? (nodes: n0)" in msg
    assert "prefill.nodes[2]: node 'n0' listed twice" in msg
    assert "prefill.dp: dp (3) must divide tp (4) when enable_dp_attention is true" in msg
    assert "router.node: unknown node 'N0'; did you mean 'n0'?" in msg
    assert all(re.match(r"topo\.yaml:\d+:\d+: ", line) for line in msg.splitlines())


def test_port_ranges_after_replica_offsets(tmp_path: Path) -> None:
    text = MINIMAL.replace("prefill:\n  nodes: [n0]", "prefill:\n  nodes: [n0]\n  replicas: 3\n  port: 65534")
    text += "transfer:\n  bootstrap_port: 65535\n"
    msg = _error(tmp_path, text)
    assert "prefill.port: ports 65534..65536 of 3 replicas exceed 65535" in msg
    assert "transfer.bootstrap_port: bootstrap ports up to 65537 (3 prefill replicas) exceed 65535" in msg


def test_yaml_level_problems(tmp_path: Path) -> None:
    assert _error(tmp_path, "") .startswith("topo.yaml: the file is empty")
    assert _error(tmp_path, "# only a comment\n").startswith("topo.yaml: the file is empty")
    assert _error(tmp_path, "- a\n- b\n").startswith("topo.yaml:1:1: expected a mapping at the top level")
    assert _error(tmp_path, "just text\n").startswith("topo.yaml:1:1: expected a mapping at the top level")
    msg = _error(tmp_path, "name: x\nnodes: [a, b\nmodel: {}\n")
    assert re.match(r"topo\.yaml:\d+:\d+: YAML syntax error: ", msg)
    msg = _error(tmp_path, MINIMAL + "name: again\n")
    assert msg == f"topo.yaml:{len(MINIMAL.splitlines()) + 1}:1: name: duplicate key 'name' (first at line 1)"
    assert "YAML syntax error" in _error(tmp_path, "a: 1\n---\nb: 2\n")
    assert "unsupported YAML tag" in _error(tmp_path, "name: !!set {a, b}\n")
    assert "not UTF-8" in _error(tmp_path, b"name: \xff\xfe\n")
    assert "invalid value" in _error(tmp_path, MINIMAL + "server:\n  random_seed: 2024-13-45\n")
    assert "mapping keys must be plain names" in _error(tmp_path, "? [a, b]\n: 1\n")


def test_alias_abuse_fails_fast(tmp_path: Path) -> None:
    bomb = "a: &a [x, x, x, x, x, x, x, x, x, x]\n"
    for i in range(1, 9):
        bomb += f"{chr(97 + i)}: &{chr(97 + i)} [" + ", ".join([f"*{chr(96 + i)}"] * 10) + "]\n"
    assert "document too large" in _error(tmp_path, bomb)
    assert "recursive alias" in _error(tmp_path, "a: &a [1, *a]\n")
    assert "nesting deeper than 64 levels" in _error(tmp_path, "a: " + "[" * 5000 + "]" * 5000 + "\n")


def test_merge_keys_and_anchors_work(tmp_path: Path) -> None:
    text = MINIMAL.replace("prefill:\n  nodes: [n0]", "prefill: &role\n  nodes: [n0]\n  tp: 2").replace(
        "decode:\n  nodes: [n0]", "decode:\n  <<: *role\n  tp: 4")
    path = tmp_path / "ok.yaml"
    path.write_text(text)
    topo = load_topology(path)
    assert (topo.prefill.tp, topo.decode.tp, topo.decode.nodes) == (2, 4, ["n0"])


def test_file_level_problems(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no such topology file"):
        load_topology(tmp_path / "missing.yaml")
    with pytest.raises(UserError, match="is a directory"):
        load_topology(tmp_path)


def test_keys_that_look_like_pydantic_markers() -> None:
    with pytest.raises(UserError, match=r"(?m)^<string>:\d+:1: \[key\]: unknown key '\[key\]'"):
        load_topology_text(MINIMAL + "'[key]': null\n")
    with pytest.raises(UserError, match=r"engine\.env\[1\]: expected a string key, got the integer 1"):
        build_topology({"name": "x", "model": {"path": "m"}, "engine": {"env": {1: "a"}},
                        "nodes": [{"name": "n0", "host": "h", "gpu": "cpu", "gpus": 1}],
                        "prefill": {"nodes": ["n0"]}, "decode": {"nodes": ["n0"]}})


def test_text_and_data_sources_name_themselves() -> None:
    with pytest.raises(UserError, match=r"(?m)^<string>:1:7: name: expected a name"):
        load_topology_text("name: X!\n")
    with pytest.raises(UserError, match=r"^cfg:3:"):
        load_topology_text(FULL.replace("kind: sglang", "kind: vllm"), source="cfg")
    with pytest.raises(UserError, match=r"^<data>: nodes: expected a list, got the string 'n0'"):
        build_topology({"name": "x", "model": {"path": "m"}, "nodes": "n0", "prefill": {"nodes": ["n0"]},
                        "decode": {"nodes": ["n0"]}})


def test_a_name_too_long_for_a_directory_is_refused_at_load(tmp_path: Path) -> None:
    """Issue 16: a 300-character name loaded, then failed later with "File name too long" (run dir, job name)."""
    name = MINIMAL.splitlines()[0]
    assert name.startswith("name: ")
    msg = _error(tmp_path, MINIMAL.replace(name, "name: " + "a" * 300, 1))
    assert msg == "topo.yaml:1:7: name: expected at most 63 characters, got 300"
    assert load_topology_text(MINIMAL.replace(name, "name: " + "a" * 63, 1), source="t.yaml").name == "a" * 63
