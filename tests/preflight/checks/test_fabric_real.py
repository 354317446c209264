"""Fabric scoping for real on this machine: the node probe gathers the PCIe tree, the GPU-registration facts
and the UCX environment; preflight's verdict on UCX_NET_DEVICES is held against NIXL 1.5.1 itself creating
its UCX backend under that setting (sglang PR #40641: only an RDMA port that is not there leaves NIXL's
endpoint to itself without a transport -> NIXL_ERR_BACKEND; adding lo fixes it); and `pdctl preflight` says
so on a local topology."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pdctl.preflight.checks import fabric
from pdctl.preflight.context import Context
from pdctl.preflight.gather import PROBE_SOURCE, NodeFacts, node_roles
from pdctl.preflight.probe import MARKER
from pdctl.render.deployment import render
from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import local_cpu
from tests.support.topo_factory import make

pytestmark = pytest.mark.e2e  # runs the probe and NIXL in subprocesses

NIXL_SOURCE = """
from nixl._api import nixl_agent, nixl_agent_config
try:
    nixl_agent("fabric-check", nixl_agent_config(backends=["UCX"]))
    print("NIXL OK")
except Exception as exc:
    print("NIXL FAILED", type(exc).__name__, exc)
"""


def probe_here(env: dict[str, str]) -> dict:
    """The node probe, run as preflight runs it (`python -c <probe> <args>`), in ENV."""
    done = subprocess.run([sys.executable, "-c", PROBE_SOURCE, json.dumps({"gpu": False})], capture_output=True,
                          text=True, timeout=60, env={**os.environ, **env}, check=False)
    line = next((x for x in done.stdout.splitlines() if x.startswith(MARKER)), None)
    assert line is not None, done.stderr[-2000:]
    return json.loads(line[len(MARKER):])


def nixl_works(env: dict[str, str]) -> tuple[bool, str]:
    done = subprocess.run([sys.executable, "-c", NIXL_SOURCE], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env}, check=False)
    return "NIXL OK" in done.stdout, done.stdout + done.stderr[-2000:]


def test_probe_gathers_fabric_facts_here() -> None:
    facts = probe_here({"UCX_NET_DEVICES": "lo"})
    assert facts["gdr"]["kernel"] == platform.release() and isinstance(facts["gdr"]["peermem"], bool)
    assert facts["ucx_env"]["UCX_NET_DEVICES"] == "lo"
    assert isinstance(facts["pci"], str)
    ib = sorted(os.listdir("/sys/class/infiniband")) if os.path.isdir("/sys/class/infiniband") else []
    assert [line.split()[1] for line in facts["pci"].splitlines() if line.startswith("ib ")] == ib


@pytest.mark.parametrize("value", ["mlx5_0:1", "lo", "mlx5_0:1,lo"])
def test_self_endpoint_verdict_agrees_with_nixl(value: str) -> None:
    """On this machine (no HCA named mlx5_0): NIXL fails exactly when preflight says its self endpoint has
    no transport."""
    if os.path.isdir("/sys/class/infiniband/mlx5_0"):
        pytest.fail("this test needs a machine without an HCA named mlx5_0")
    facts = probe_here({"UCX_NET_DEVICES": value})
    topo, _ = make(nodes=[{"name": "p0", "host": "127.0.0.1", "gpu": "cpu", "gpus": 2},
                          {"name": "d0", "host": "127.0.0.2", "gpu": "cpu", "gpus": 4}])
    nodes = {n.name: NodeFacts(n.name, "local", sys.executable, 0.1, facts) for n in topo.nodes}
    deployment = render(topo)
    checks = {c.check: c for n, c in fabric.run(Context(deployment, None, None, nodes, node_roles(deployment), "0.1.0"))
              if n == "p0"}
    works, output = nixl_works({"UCX_NET_DEVICES": value})
    assert checks["ucx.self_endpoint"].failed is (not works), (checks["ucx.self_endpoint"], output)
    if not works:
        assert "NIXL_ERR_BACKEND" in output


def test_preflight_command_says_no_for_a_bare_rdma_pin(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = local_cpu(tmp_path, ref_checkpoint, name="fabric-pin", engine={"env": {"UCX_NET_DEVICES": "mlx5_0:1"}})
    done = pdctl("preflight", str(topo), "--skip-transfer", "--json", "-", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    found = [c for node in doc["nodes"] for c in node["checks"] if c["check"] == "ucx.self_endpoint"]
    assert found and not found[0]["ok"] and "NIXL_ERR_BACKEND" in found[0]["message"]
    fixed = yaml.safe_load(topo.read_text())
    fixed["engine"]["env"]["UCX_NET_DEVICES"] = "lo"
    topo.write_text(yaml.safe_dump(fixed))
    done = pdctl("preflight", str(topo), "--skip-transfer", "--json", "-", cwd=tmp_path, timeout=300)
    doc = json.loads(done.stdout)
    mine = [c for node in doc["nodes"] for c in node["checks"] if c["check"] in ("ucx.net_devices", "ucx.self_endpoint")]
    assert mine and all(c["ok"] for c in mine), mine
