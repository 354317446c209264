"""The check families over gathered facts (pure logic; the facts are real captured tool outputs from
tests/preflight/data where a tool is involved): each check must be able to say no."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pdctl.preflight.checks import gpu, rdma, software
from pdctl.preflight.context import Context
from pdctl.preflight.gather import NodeFacts, node_roles
from pdctl.preflight.report import TransferResult
from pdctl.preflight.runner import transfer_checks
from pdctl.render.deployment import render
from pdctl.render.transfer import with_nvlink
from tests.support.topo_factory import make

DATA = Path(__file__).resolve().parents[1] / "data"
H100 = (DATA / "nvidia-smi-q-h100-hgx.txt").read_text()
IB = (DATA / "ib-sysfs-h100.txt").read_text()


def _facts(**over: Any) -> dict[str, Any]:
    base = {"hostname": "n", "python": {"executable": "/usr/bin/python3", "version": "3.11.7", "machine": "x86_64"},
            "packages": {"sglang": "0.5.23", "nixl": "1.5.1", "torch": "2.9.1", "mooncake": None, "pdctl": None,
                         "sglang_router": "0.3.2"},
            "nvidia_smi": {"rc": 0, "out": H100, "err": ""}, "ib_sysfs": IB, "ucx_info": None}
    return {**base, **over}


def _ctx(topo: Any, per_node: dict[str, dict[str, Any]]) -> Context:
    facts = {n.name: NodeFacts(n.name, "ssh", "python3", 0.1, per_node.get(n.name, _facts())) for n in topo.nodes}
    deployment = render(topo)
    return Context(deployment, None, "no spec in this test", facts, node_roles(deployment), "0.1.0")


def _errors(results: list) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for node, check in results:
        if check.failed:
            out.setdefault(node, []).append(check.check)
    return out


def test_gpu_model_and_count_against_the_topology() -> None:
    topo, _ = make(nodes=[{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "10.0.0.12", "gpu": "gb300", "gpus": 4}])
    assert _errors(gpu.run(_ctx(topo, {}))) == {"d0": ["gpu.model"]}
    topo, _ = make(nodes=[{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 16},
                          {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8}], decode={"tp": 8})
    assert _errors(gpu.run(_ctx(topo, {}))) == {"p0": ["gpu.count"]}


def test_nvlink_on_fails_when_nodes_share_no_domain() -> None:
    topo, _ = make(nodes=[{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8}],
                   transfer={"backend": "mooncake", "nvlink": "on"})
    ctx = _ctx(topo, {})
    assert gpu.nvlink_domain(ctx) is False  # the H100 capture's zero ClusterUUIDs are no shared domain
    assert "nvlink.mode" in _errors(gpu.run(ctx))["p0"]


def test_shared_nvlink_domain_needs_imex_channels() -> None:
    fabric = ("    Fabric\n        State : Completed\n        Status : Success\n        CliqueId : 4026\n"
              "        ClusterUUID : 9c6f5af3-53bf-49b5-a436-b66766c413c3\n")
    smi = {"rc": 0, "out": "GPU 00000008:01:00.0\n    Product Name : NVIDIA GB300 NVL\n" + fabric, "err": ""}
    topo, _ = make(nodes=[{"name": "p0", "host": "10.0.0.11", "gpu": "gb300", "gpus": 1},
                          {"name": "d0", "host": "10.0.0.12", "gpu": "gb300", "gpus": 1}],
                   transfer={"backend": "mooncake"}, decode={"tp": 1})
    ctx = _ctx(topo, {"p0": _facts(nvidia_smi=smi, imex_channels=["channel0"]), "d0": _facts(nvidia_smi=smi)})
    assert gpu.nvlink_domain(ctx) is True
    assert _errors(gpu.run(ctx)) == {"d0": ["nvlink.imex"]}
    deployment = with_nvlink(render(topo), True)  # auto + shared domain: Mooncake's MNNVL environment
    assert all(w.env.get("MC_FORCE_MNNVL") == "True" and w.env["SGLANG_MOONCAKE_CUSTOM_MEM_POOL"] == "NVLINK"
               for w in deployment.workers)
    assert not any("MC_FORCE_MNNVL" in w.env for w in with_nvlink(render(topo), False).workers)


def test_rdma_devices_named_in_the_topology() -> None:
    topo, _ = make(nodes=[{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 8,
                           "ib_devices": ["mlx5_0", "mlx5_2"]},
                          {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8, "ib_devices": ["mlx5_1"]}],
                   decode={"tp": 8})
    down = IB.replace("mlx5_1/ports/1/state:4: ACTIVE", "mlx5_1/ports/1/state:1: DOWN")
    results = rdma.run(_ctx(topo, {"d0": _facts(ib_sysfs=down)}))
    assert _errors(results) == {"p0": ["rdma.device"], "d0": ["rdma.device"]}
    messages = [c.message for _, c in results if c.failed]
    assert "mlx5_2 is not in /sys/class/infiniband" in messages[0] and "no ACTIVE port (port 1: DOWN)" in messages[1]


def test_versions_against_the_topology_and_across_nodes() -> None:
    topo, _ = make(nodes=[{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8}], decode={"tp": 8})
    older = _facts(packages={**_facts()["packages"], "sglang": "0.5.22"})
    assert _errors(software.run(_ctx(topo, {"d0": older}))) == {"d0": ["versions.sglang", "versions.same.sglang"]}
    no_nixl = _facts(packages={**_facts()["packages"], "nixl": None})
    assert _errors(software.run(_ctx(topo, {"p0": no_nixl}))) == {"p0": ["versions.nixl"]}


def test_transfer_verdicts() -> None:
    ok = TransferResult("p0", "d0", "nixl", "tcp/eth1 (inter-node)", True, 1.0, 3.0, True, expected_gbps=None)
    assert not [c for c in transfer_checks(ok, True) if c.failed]
    local = TransferResult("p0", "d0", "nixl", "cma/memory (intra-node)", False, 5.0, 3.0, True)
    assert [c.check for c in transfer_checks(local, True) if c.failed] == ["transfer.path"]
    slow = TransferResult("p0", "d0", "mooncake", "mooncake tcp via eth0", True, 0.11, 30.0, True, expected_gbps=50.0)
    assert [c.check for c in transfer_checks(slow, True) if c.failed] == ["transfer.rate"]
    wrong = TransferResult("p0", "d0", "nixl", "tcp/eth1", True, 1.0, 3.0, False, error="12 bytes arrived wrong")
    assert [c.check for c in transfer_checks(wrong, True) if c.failed] == ["transfer"]


def test_a_reference_model_that_is_missing_points_at_init_checkpoint() -> None:
    from pdctl.preflight.checks import model

    topo, _ = make(engine={"kind": "reference", "python": "python3", "version": None},
                   model={"path": "/ckpt/reference-tiny", "preset": "reference-tiny"},
                   nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "cpu", "gpus": 4}],
                   prefill={"nodes": ["p0"], "tp": 1}, decode={"nodes": ["p0"], "tp": 1})
    missing = {"model": {"path": "/ckpt/reference-tiny", "exists": False}}
    fixes = [c.fix for _, c in model.run(_ctx(topo, {"p0": _facts(**missing)})) if c.failed]
    assert fixes == [("create it on that node: `pdctl reference init-checkpoint /ckpt/reference-tiny` (the reference "
                     "engine's seeded checkpoint; the same seed writes the same weights everywhere)")]


def test_a_run_dir_a_node_does_not_share_fails_preflight() -> None:
    """A Slurm launch writes a token into its run dir; a node that reads another file (its own /tmp) or none
    fails shared.run_dir; the directories its steps start in must exist on every node."""
    from dataclasses import replace

    from pdctl.preflight.checks import shared

    topo, _ = make()
    token = "/shared/run/.pdctl-shared-check"
    reads = {"p0": {"read_files": {token: {"text": "abc"}}, "dirs": {"/work": True}},
             "d0": {"read_files": {token: {"error": "FileNotFoundError: No such file or directory"}},
                    "dirs": {"/work": False}}}
    ctx = replace(_ctx(topo, {n: _facts(**f) for n, f in reads.items()}), shared_files={token: "abc"},
                  needed_dirs={"working directory": "/work"})
    assert _errors(shared.run(ctx)) == {"d0": ["shared.run_dir", "shared.dirs"]}
    reads["d0"]["read_files"][token] = {"text": "another token"}  # a same-named local directory
    ctx = replace(ctx, facts=_ctx(topo, {n: _facts(**f) for n, f in reads.items()}).facts)
    failed = [c for _, c in shared.run(ctx) if c.failed and c.check == "shared.run_dir"]
    assert "another directory of the same name" in failed[0].found
    assert shared.run(replace(ctx, shared_files={}, needed_dirs={})) == []  # not a Slurm launch: nothing
