"""What each process advertises (advertise_host, hosts as names) and the transfer-path environment
(transfer.nvlink, UCX path reporting) in the rendered plan and `launch --dry-run`."""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

from pdctl.render.deployment import render
from pdctl.render.transfer import with_nvlink
from tests.support.launch_e2e import pdctl
from tests.support.topo_factory import BASE, make, merge


def test_advertise_host_is_bound_advertised_and_in_urls() -> None:
    topo, _ = make(nodes=[
        {"name": "p0", "host": "gpu-p0.mgmt", "advertise_host": "10.1.0.11", "gpu": "h100", "gpus": 8},
        {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8},
    ], decode={"tp": 8}, router={"node": "p0"})
    plan = render(topo)
    prefill, decode = plan.workers
    assert prefill.host == "gpu-p0.mgmt"  # how pdctl reaches the node (ssh, srun)
    assert prefill.advertise == "10.1.0.11" and prefill.url.startswith("http://10.1.0.11:")
    assert prefill.argv[prefill.argv.index("--host") + 1] == "10.1.0.11"
    assert prefill.env["SGLANG_HOST_IP"] == "10.1.0.11"  # SGLang's bootstrap / KV endpoints use this address
    assert decode.env["SGLANG_HOST_IP"] == "10.0.0.12"
    assert plan.router_url.startswith("http://10.1.0.11:") and plan.router.advertise == "10.1.0.11"
    assert f"--prefill {prefill.url}" in " ".join(plan.router.argv)


def test_a_host_name_is_left_to_the_node() -> None:
    topo, _ = make(nodes=[{"name": "p0", "host": "gpu-p0", "gpu": "h100", "gpus": 8},
                          {"name": "d0", "host": "gpu-d0", "gpu": "h100", "gpus": 8}], decode={"tp": 8})
    prefill = render(topo).workers[0]
    assert prefill.url.startswith("http://gpu-p0:") and "SGLANG_HOST_IP" not in prefill.env


def test_user_env_wins_over_the_rendered_address() -> None:
    topo, _ = make(engine={"env": {"SGLANG_HOST_IP": "192.168.1.5", "UCX_PROTO_INFO": "n"}})
    prefill = render(topo).workers[0]
    assert prefill.env["SGLANG_HOST_IP"] == "192.168.1.5" and prefill.env["UCX_PROTO_INFO"] == "n"


def test_ucx_path_reporting_on_prefill_only() -> None:
    topo, _ = make()
    prefill, decode = render(topo).workers
    assert prefill.env["UCX_PROTO_INFO"] == "y" and prefill.env["UCX_LOG_FILE"] == "stderr"
    assert "UCX_PROTO_INFO" not in decode.env


def test_transfer_nvlink_modes() -> None:
    on, _ = make(transfer={"backend": "mooncake", "nvlink": "on"})
    plan = render(on)
    assert all(w.env["MC_FORCE_MNNVL"] == "True" and w.env["SGLANG_MOONCAKE_CUSTOM_MEM_POOL"] == "NVLINK"
               for w in plan.workers)
    auto, _ = make(transfer={"backend": "mooncake"})
    assert not any("MC_FORCE_MNNVL" in w.env for w in render(auto).workers)
    assert any("auto without preflight" in n for n in render(auto).notes)
    nixl_on, _ = make(transfer={"backend": "nixl", "nvlink": "on"})
    plan = render(nixl_on)
    assert not any("MC_FORCE_MNNVL" in w.env for w in plan.workers)
    assert any("no effect with NIXL" in n for n in plan.notes)
    off, _ = make(transfer={"backend": "mooncake", "nvlink": "off"})
    assert not any("MC_FORCE_MNNVL" in w.env for w in with_nvlink(render(off), True).workers)
    h100, _ = make(transfer={"backend": "mooncake"}, nodes=[  # no NVLink across H100 nodes: nothing to note
        {"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 8},
        {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 8}])
    assert render(h100).notes == [] and with_nvlink(render(h100), True).notes == []


def test_nvlink_auto_is_adjusted_from_preflight_without_rendering_again() -> None:
    """`transfer.nvlink: auto` renders without NVLink; preflight's finding adjusts that deployment's environment
    (and note) in place of a second render; a value the user set in engine.env still wins; no finding (None)
    leaves it as rendered."""
    auto, _ = make(transfer={"backend": "mooncake"}, engine={"env": {"MC_FORCE_MNNVL": "False"}})
    rendered = render(auto)
    assert with_nvlink(rendered, None) is rendered
    shared = with_nvlink(rendered, True)
    assert shared.nvlink and all(w.env["SGLANG_MOONCAKE_CUSTOM_MEM_POOL"] == "NVLINK" for w in shared.workers)
    assert all(w.env["MC_FORCE_MNNVL"] == "False" for w in shared.workers)  # engine.env wins
    assert any("nodes share an NVLink domain" in n for n in shared.notes)
    assert not any("auto without preflight" in n for n in shared.notes)
    assert shared.transfer_env["prefill"]["SGLANG_MOONCAKE_CUSTOM_MEM_POOL"] == "NVLINK"
    assert [w.argv for w in shared.workers] == [w.argv for w in rendered.workers]
    apart = with_nvlink(rendered, False)  # preflight found no shared domain: over the NIC, and no stale note
    assert not apart.nvlink and not any("MC_FORCE_MNNVL" in w.env and w.env["MC_FORCE_MNNVL"] == "True"
                                        for w in apart.workers)
    assert not any("auto without preflight" in n for n in apart.notes)
    back = with_nvlink(shared, False)  # and the MNNVL environment is taken away again
    assert not any("SGLANG_MOONCAKE_CUSTOM_MEM_POOL" in w.env for w in back.workers)


def test_dry_run_says_what_each_process_advertises(tmp_path: Path) -> None:
    raw = merge(BASE, {"nodes": [
        {"name": "p0", "host": "gpu-p0.mgmt", "advertise_host": "10.1.0.11", "gpu": "gb300", "gpus": 4},
        {"name": "d0", "host": "10.0.0.12", "gpu": "gb300", "gpus": 4}]})
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(raw))
    done = pdctl("launch", str(path), "--dry-run", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "# node p0 (gpu-p0.mgmt)" in done.stdout and "# prefill-0 (advertises 10.1.0.11)" in done.stdout


def test_each_node_runs_its_own_interpreter() -> None:
    """The router on a node that is another machine (no ssh:, e.g. started there by hand or a scheduler) ran
    this machine's venv python while that node's servers ran engine.python (issue 20)."""
    remote, _ = make(nodes=[{"name": "p0", "host": "10.1.0.1", "gpu": "h100", "gpus": 8},
                            {"name": "d0", "host": "10.1.0.2", "gpu": "h100", "gpus": 8}],
                     engine={"python": "python3"}, decode={"tp": 8}, router={"node": "p0"})
    plan = render(remote)
    assert {p.argv[0] for p in plan.processes()} == {"python3"}
    reference, _ = make(engine={"kind": "reference", "python": "python3", "version": None},
                        model={"path": "/ckpt", "preset": "reference-tiny"},
                        nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "cpu", "gpus": 4},
                               {"name": "d0", "host": "10.1.0.2", "gpu": "cpu", "gpus": 4}],
                        prefill={"tp": 1}, decode={"tp": 1}, router={"node": "d0"})
    plan = render(reference)
    by_name = {p.name: p.argv[0] for p in plan.processes()}
    assert by_name == {"prefill-0": sys.executable, "decode-0": "python3", "router": "python3"}
    assert plan.pythons == {"p0": sys.executable, "d0": "python3"}  # what preflight probes each node with
    named, _ = make(engine={"kind": "reference", "python": "python3", "version": None},
                    model={"path": "/ckpt", "preset": "reference-tiny"},
                    nodes=[{"name": "p0", "host": "cpu-a", "gpu": "cpu", "gpus": 4},
                           {"name": "d0", "host": "cpu-b", "gpu": "cpu", "gpus": 4}],
                    prefill={"tp": 1}, decode={"tp": 1})
    assert {p.argv[0] for p in render(named).processes()} == {"python3"}
    slurm = render(named, executor="slurm")  # a Slurm job's nodes run the job's pdctl interpreter (shared)
    assert {p.argv[0] for p in slurm.processes()} == {sys.executable}
