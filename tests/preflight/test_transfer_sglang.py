"""Preflight's cross-node transfer on SGLang's own stack: on an `engine.kind: sglang` topology whose nodes have
SGLang (the side environment, bound as the engine's environment on two namespaced hosts reached over ssh),
SGLang's KV managers, senders, receivers and bootstrap server move the planned request from host a to host b,
verified byte for byte, and the report says SGLang's stack ran; on nodes without SGLang pdctl's own transfer
runs instead, and the report says that too (and why)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.launch_e2e import pdctl
from tests.support.multihost import hosts_with_checkpoint, pd_topology
from tests.support.netns import netns_missing_reason
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]


@pytest.fixture(scope="module")
def hosts(tmp_path_factory: pytest.TempPathFactory):
    with hosts_with_checkpoint(tmp_path_factory.mktemp("preflight-sglang")) as hosts:
        yield hosts


def _transfer(hosts: dict, topo: Path) -> tuple[dict, str]:
    done = pdctl("preflight", str(topo), "--json", "-", "--tokens", "256", cwd=hosts["tmp"], timeout=600)
    doc = json.loads(done.stdout)
    (transfer,) = doc["transfers"]
    return transfer, done.stderr


def test_sglang_topology_runs_sglang_stack_between_hosts(hosts: dict, sglang_stack_python: str) -> None:
    mh = hosts["mh"]
    side_env = Path(sglang_stack_python).parents[1]
    for letter in "ab":
        mh.use_env(letter, side_env)
    try:
        topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="mooncake", name="pf-sglang",
                           engine={"kind": "sglang", "version": "0.5.23", "python": mh.python},
                           transfer={"backend": "mooncake", "protocol": "tcp"})
        transfer, err = _transfer(hosts, topo)
    finally:
        for letter in "ab":
            mh.restore_env(letter)
    assert transfer["verified"] and transfer["error"] is None, (transfer, err[-3000:])
    details = transfer["details"]
    assert details["stack"] == "sglang" and details["sglang_version"] == "0.5.23", details
    assert details["memory"] == "DRAM" and transfer["descriptors"] > 0 and transfer["bytes"] > 0
    assert transfer["transport"].startswith("mooncake tcp") and transfer["crosses_nodes"] is True, transfer
    assert "sglang 0.5.23" in err  # the human report names the stack that ran


def test_without_sglang_on_the_nodes_pdctl_transfer_runs_and_says_why(hosts: dict) -> None:
    mh = hosts["mh"]  # the engine environment is pdctl's own: no SGLang there
    topo = pd_topology(mh, hosts["tmp"], hosts["checkpoint"], backend="nixl", name="pf-fallback",
                       engine={"kind": "sglang", "version": "0.5.23", "python": mh.python})
    transfer, err = _transfer(hosts, topo)
    assert transfer["verified"], (transfer, err[-3000:])
    assert transfer["details"]["stack"] == "pdctl"
    assert "not importable" in transfer["details"]["why"]
    assert "pdctl's own transfer ran instead" in " ".join(err.split()), err[-2000:]
