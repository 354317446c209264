"""`sweep:` (pdctl.topology.sweep, .variants): a grid or zipped lists of values for dotted keys, one validated
topology per variant named after its values; bad sections located; a sweep is refused where one topology is
expected; `--set` changes the document every variant starts from."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdctl.errors import UserError
from pdctl.topology import load_topology
from pdctl.topology.sweep import MAX_VARIANTS, Sweep, parse_sweep
from pdctl.topology.variants import load_sweep
from tests.support.paths import CONFIGS_DIR

LOCAL = yaml.safe_load((CONFIGS_DIR / "local-cpu.yaml").read_text())


def sweep_file(tmp_path: Path, sweep: object, **over: object) -> Path:
    doc = {**LOCAL, **over, "sweep": sweep}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def test_grid_and_zip() -> None:
    grid = Sweep({"decode.tp": [1, 2], "server.page_size": [16, 32, 64]}).variants()
    assert len(grid) == 6 and grid[0].name == "decode.tp=1_server.page_size=16"
    assert grid[-1].values == {"decode.tp": 2, "server.page_size": 64}
    zipped = Sweep({"decode.tp": [1, 2], "server.page_size": [16, 32], "server.random_seed": [7]}, zip=True).variants()
    assert [v.values for v in zipped] == [{"decode.tp": 1, "server.page_size": 16, "server.random_seed": 7},
                                          {"decode.tp": 2, "server.page_size": 32, "server.random_seed": 7}]
    assert zipped[0].overrides() == ["decode.tp=1", "server.page_size=16", "server.random_seed=7"]
    odd = Sweep({"engine.env": [{"A": "b c"}], "model.path": ["/x/y"]}).variants()[0]
    assert odd.name == "engine.env=-A-b-c-_model.path=-x-y"  # a file name: no '/', quotes or blanks


def test_every_variant_is_a_validated_topology(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, {"params": {"decode.tp": [1, 2], "server.page_size": [16, 32]}})
    load = load_sweep(path)
    assert [v.variant.name for v in load.variants] == [
        "decode.tp=1_server.page_size=16", "decode.tp=1_server.page_size=32",
        "decode.tp=2_server.page_size=16", "decode.tp=2_server.page_size=32"]
    topo = load.variants[3].topology
    assert topo.decode.tp == 2 and topo.decode.page_size == 32 and topo.variant["name"].startswith("decode.tp=2")
    assert "sweep" not in topo.document and topo.document["decode"]["tp"] == 2


def test_set_changes_the_base_and_a_swept_key_keeps_its_variant_value(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, {"params": {"decode.tp": [1, 2]}})
    load = load_sweep(path, ["decode.tp=4", "server.page_size=32"])
    assert [(v.topology.decode.tp, v.topology.decode.page_size) for v in load.variants] == [(1, 32), (2, 32)]
    assert load_sweep(path, ["sweep=null"]) is None  # no sweep left: a plain topology
    assert load_topology(path, ["sweep=null"]).decode.tp == LOCAL["decode"]["tp"]


def test_a_sweep_is_refused_where_one_topology_is_expected(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, {"params": {"decode.tp": [1, 2]}})
    with pytest.raises(UserError, match=r"s.yaml:\d+:1: sweep: this topology is a sweep: check-compat and launch "
                                        r"take it .* --set sweep=null --set KEY=VALUE"):
        load_topology(path)


def test_an_invalid_variant_is_that_variants_failure(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, {"params": {"decode.tp": [1, "two"]}})
    load = load_sweep(path)
    good, bad = load.variants
    assert good.topology is not None and bad.topology is None
    assert bad.error == "sweep variant decode.tp=two: decode.tp=\"two\": decode.tp: expected an integer, got the string 'two'"


def test_every_variant_invalid_is_bad_input(tmp_path: Path) -> None:
    path = sweep_file(tmp_path, {"params": {"decode.tpp": [1, 2]}})
    with pytest.raises(UserError, match=r"every variant of the sweep in .*s.yaml is invalid; the first, "
                                        r"decode.tpp=1:\n.*unknown key 'tpp'; did you mean 'tp'"):
        load_sweep(path)


@pytest.mark.parametrize(("sweep", "message"), [
    ([1, 2], r"sweep: expected a mapping \{params: "),
    ({"params": {}}, r"sweep.params: expected a mapping of dotted keys"),
    ({"params": {"decode.tp": 2}}, r"sweep.params.decode.tp: expected a non-empty list"),
    ({"params": {"decode.tp": []}}, r"expected a non-empty list"),
    ({"params": {"decode..tp": [1]}}, r"bad key 'decode..tp'"),
    ({"params": {"name": ["a", "b"]}}, r"name cannot be swept"),
    ({"params": {"decode.tp": [1]}, "zip": "yes"}, r"sweep.zip: expected true .* or false"),
    ({"params": {"decode.tp": [1]}, "grid": True}, r"unknown key 'grid'; expected params and zip"),
    ({"params": {"decode.tp": [1, 2], "prefill.tp": [1, 2, 4]}, "zip": True},
     r"sweep.zip: zip: true pairs the lists in order, so they need one length .*decode.tp: 2, prefill.tp: 3"),
    ({"params": {"decode.tp": list(range(1, 20)), "prefill.tp": list(range(1, 20))}},
     rf"361 variants \(at most {MAX_VARIANTS}\): split the sweep"),
])
def test_bad_sweep_sections_are_located(tmp_path: Path, sweep: object, message: str) -> None:
    path = sweep_file(tmp_path, sweep)
    with pytest.raises(UserError, match=r"s.yaml:\d+:\d+: (sweep[\w.]*: )?" + message):
        load_sweep(path)


def test_parse_sweep_without_a_sweep() -> None:
    assert parse_sweep({"name": "x"}, "<t>") is None and parse_sweep({"sweep": None}, "<t>") is None


def test_the_example_sweep() -> None:
    load = load_sweep(CONFIGS_DIR / "sweeps" / "gpt-oss-120b-gb300-sweep.yaml")
    assert [v.variant.name for v in load.variants] == [
        "engine.version=0.5.8_decode.tp=1", "engine.version=0.5.8_decode.tp=4",
        "engine.version=0.5.23_decode.tp=1", "engine.version=0.5.23_decode.tp=4"]
    assert all(v.topology is not None for v in load.variants)
