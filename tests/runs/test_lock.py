"""lock.json (pdctl.runs.lock, written by pdctl.launch.lockfile) and `pdctl diff`'s comparison of two locks:
the topology as launched and its hash, the version choice and flag table, node facts, and preflight's problems
(a node whose SGLang is not engine.version among them)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.launch.lockfile import record_lock
from pdctl.preflight.report import NodeReport, PreflightReport, failed, passed
from pdctl.runs.diff import diff_locks, diff_runs, flatten
from pdctl.runs.lock import lock_pointer, read_lock
from pdctl.sglang.versions import choose
from tests.support.topo_factory import rendered


def _report(sglang: str) -> PreflightReport:
    checks = [passed("arch", "x86_64 (uname -m)", "x86_64")]
    if sglang != "0.5.23":
        checks.append(failed("versions.sglang", f"sglang {sglang}, but the topology says engine.version 0.5.23",
                             found=sglang, expected="0.5.23"))
    nodes = [NodeReport(n, f"10.0.0.1{i}", [r], checks, {"machine": "x86_64", "gpu_model": "NVIDIA GB300",
                                                          "gpu_count": 4, "driver": "580.65", "cuda": "13.0",
                                                          "packages": {"sglang": sglang, "nixl": "0.7.1"}})
             for i, (n, r) in enumerate((("p0", "prefill"), ("d0", "decode")))]
    return PreflightReport(topology="t", nodes=nodes)


def _lock(tmp: Path, name: str, sglang: str = "0.5.23", **over) -> Path:
    deployment, _ = rendered(**over)
    run = tmp / name
    record_lock(deployment, run, choose(deployment.topo.engine.version), _report(sglang), preflight="passed")
    return run


def test_the_lock_records_what_ran(tmp_path: Path) -> None:
    doc = read_lock(_lock(tmp_path, "a", decode={"tp": 2}))
    assert doc["topology"]["document"]["decode"]["tp"] == 2 and doc["topology"]["document"]["decode"]["nodes"] == ["d0"]
    assert len(doc["topology"]["sha256"]) == 64 and doc["pdctl"]
    assert doc["engine"]["sglang"]["table"] == "0.5.23" and doc["engine"]["sglang"]["source"] == "engine.version"
    assert doc["nodes"]["d0"]["machine"] == "x86_64" and doc["nodes"]["p0"]["packages"]["sglang"] == "0.5.23"
    assert doc["problems"] == [] and doc["preflight"] == "passed"
    pointer = lock_pointer(tmp_path / "a")
    assert pointer is not None and pointer["topology_sha256"] == doc["topology"]["sha256"]
    assert lock_pointer(tmp_path / "none") is None


def test_a_node_with_another_sglang_is_recorded(tmp_path: Path) -> None:
    doc = read_lock(_lock(tmp_path, "a", sglang="0.5.22"))
    assert {(p["node"], p["check"], p["found"]) for p in doc["problems"]} == {
        ("p0", "versions.sglang", "0.5.22"), ("d0", "versions.sglang", "0.5.22")}


def test_diff_names_what_differs(tmp_path: Path) -> None:
    a = _lock(tmp_path, "a")
    b = _lock(tmp_path, "b", sglang="0.5.22", decode={"tp": 2}, engine={"version": "0.5.22"})
    doc = diff_runs(a, b)
    keys = {row["key"]: (row["a"], row["b"]) for row in doc["differences"]}
    assert keys["topology: decode.tp"] == (4, 2)
    assert keys["engine.version"] == ("0.5.23", "0.5.22") and keys["engine.sglang.table"] == ("0.5.23", "0.5.22")
    assert keys["nodes.d0.packages.sglang"] == ("0.5.23", "0.5.22")
    assert "topology.sha256" in keys and not doc["same"]
    assert "written_at" not in keys
    assert diff_runs(a, a)["same"] and diff_runs(a, a)["differences"] == []


def test_flatten_and_a_missing_lock() -> None:
    assert flatten({"a": {"b": [1, {"c": 2}], "e": {}}}) == {"a.b[0]": 1, "a.b[1].c": 2, "a.e": {}}
    assert diff_locks({"x": 1}, {"y": 1}) == [{"key": "x", "section": "x", "a": 1, "b": None},
                                              {"key": "y", "section": "y", "a": None, "b": 1}]
    with pytest.raises(UserError) as err:
        read_lock(Path("/nonexistent/run"))
    assert "lock.json" in err.value.message


def test_the_lock_is_json(tmp_path: Path) -> None:
    json.loads((_lock(tmp_path, "a") / "lock.json").read_text())
