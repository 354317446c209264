"""Every example topology in configs/ loads, places cleanly and says what its comment claims."""

from __future__ import annotations

from pathlib import Path

import pytest

from pdctl.topology import load_topology
from pdctl.topology.placement import machine_key, place, placement_problems, port_bindings, port_clashes
from tests.support.topologies import CONFIGS, REPO


def test_the_five_example_configs_exist() -> None:
    names = {p.name for p in CONFIGS}
    assert {
        "gpt-oss-120b-p1-d4-gb300-nixl.yaml", "gpt-oss-120b-p1-d4-gb300-mooncake.yaml",
        "gpt-oss-20b-p2-d1-h100-nixl.yaml", "llama-3.1-8b-p4-d2-h100.yaml", "local-cpu.yaml",
        "local-cpu-reference.yaml",
    } <= names


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: p.name)
def test_example_config_loads_and_places_cleanly(path: Path) -> None:
    topo = load_topology(path)
    assert topo.source_path == path.resolve()
    assert placement_problems(topo) == []
    assert port_clashes(topo) == []
    assert path.read_text().startswith("#"), "each example config starts with a comment saying what it is"
    assert "40909" in path.read_text()


@pytest.mark.parametrize("backend", ["nixl", "mooncake"])
def test_gpt_oss_120b_gb300(backend: str) -> None:
    topo = load_topology(REPO / f"configs/gpt-oss-120b-p1-d4-gb300-{backend}.yaml")
    assert topo.model.path == "openai/gpt-oss-120b" and topo.model.preset == "gpt-oss-120b"
    assert (topo.prefill.attn_tp, topo.decode.attn_tp) == (1, 4)
    assert topo.transfer.backend == backend and topo.transfer.protocol == "rdma"
    assert {n.gpu for n in topo.nodes} == {"gb300"}
    prefill, decode = place(topo)
    assert prefill.slots[0].node != decode.slots[0].node


def test_local_cpu_config() -> None:
    topo = load_topology(REPO / "configs/local-cpu.yaml")
    assert topo.engine.kind == "reference"
    assert topo.model.path == ".pdctl/checkpoints/reference-tiny" and topo.model.preset == "reference-tiny"
    assert topo.prefill.page_size == topo.decode.page_size == 16
    assert (topo.prefill.tp, topo.decode.tp) == (2, 1)
    assert topo.eval.gsm8k.num_questions == 20 and topo.eval.gsm8k.max_new_tokens == 64
    assert topo.eval.gsm8k.parallel == 16 and topo.eval.parity.max_new_tokens == 32
    ports = {topo.prefill.port, topo.decode.port, topo.transfer.bootstrap_port, topo.router.port}
    assert ports.isdisjoint({30000, 30100, 8998, 8000})
    prefill, decode = place(topo)
    assert prefill.url == "http://127.0.0.1:31000" and decode.slots[0].base_gpu_id == 2


def test_shared_h100_nodes_split_gpus() -> None:
    topo = load_topology(REPO / "configs/llama-3.1-8b-p4-d2-h100.yaml")
    prefill, decode = place(topo)
    assert (prefill.slots[0].base_gpu_id, prefill.slots[0].num_gpus) == (0, 4)
    assert (decode.slots[0].base_gpu_id, decode.slots[0].num_gpus) == (4, 2)


def test_local_cpu_reference_config() -> None:
    """The colocated reference `make demo`'s parity step launches next to local-cpu.yaml."""
    ref = load_topology(REPO / "configs/local-cpu-reference.yaml")
    pd = load_topology(REPO / "configs/local-cpu.yaml")
    assert ref.name == "local-cpu-reference" and ref.mode == "colocated" and ref.engine.kind == "reference"
    assert ref.model.path == pd.model.path == ".pdctl/checkpoints/reference-tiny"
    assert ref.model.preset == "reference-tiny"
    assert [(n.name, n.host, n.gpu, n.gpus) for n in ref.nodes] == [("local", "127.0.0.1", "cpu", 2)]
    role = ref.colocated
    assert role is not None and ref.prefill is None and pd.prefill is not None and pd.decode is not None
    assert (role.tp, role.page_size, role.port, ref.router.port) == (1, 16, 31500, 31850)
    assert role.page_size == pd.prefill.page_size and role.kv_cache_dtype == pd.decode.kv_cache_dtype
    assert [(p.name, p.url) for p in place(ref)] == [("colocated[0]", "http://127.0.0.1:31500")]
    # both deployments run at once on this machine: no port of one may be a port of the other
    ours = {(machine_key(ref.node(n)), port) for n, port, _ in port_bindings(ref)}
    theirs = {(machine_key(pd.node(n)), port) for n, port, _ in port_bindings(pd)}
    assert ours and theirs and ours.isdisjoint(theirs)
