"""Inside an allocation: the job's nodes assigned to the topology's in order, the address each advertises
(its script run for real by bash on this machine), and the bound topology."""

from __future__ import annotations

import socket
import subprocess

import pytest

from pdctl.errors import UserError
from pdctl.executors.slurm_allocation import (
    ADDRESS_SCRIPT,
    AddressReport,
    assign,
    bind,
    choose_address,
    parse_reports,
    require_allocation,
)
from tests.support.launch_samples import sglang_on_slurm


def topology(hosts: list[str | None], **slurm: object):
    return sglang_on_slurm(hosts, dict(slurm))


def test_named_nodes_keep_their_host_and_the_others_take_the_rest_in_order() -> None:
    job = ["gpu-01", "gpu-02", "gpu-03", "gpu-04"]
    assert assign(topology([None, None, None]), job) == {"p0": "gpu-01", "d0": "gpu-02", "d1": "gpu-03"}
    assert assign(topology([None, "gpu-01", None]), job) == {"p0": "gpu-02", "d0": "gpu-01", "d1": "gpu-03"}
    assert assign(topology(["gpu-04", "gpu-04", None]), job) == {"p0": "gpu-04", "d0": "gpu-04", "d1": "gpu-01"}


def test_a_job_too_small_or_without_a_named_node_is_bad_input() -> None:
    with pytest.raises(UserError, match="needs 3 node.*has 2 more"):
        assign(topology([None, None, None]), ["gpu-01", "gpu-02"])
    with pytest.raises(UserError, match="host gpu-09 is not one of this job's nodes"):
        assign(topology(["gpu-09", None, None]), ["gpu-01", "gpu-02", "gpu-03"])


def test_which_address_a_node_advertises() -> None:
    report = AddressReport("gpu-01", iface="10.1.0.5", resolved="10.0.0.5", route="10.2.0.5")
    assert choose_address(report, interface="ib0", one_machine=False) == "10.1.0.5"
    assert choose_address(report, interface=None, one_machine=False) == "10.0.0.5"
    loop = AddressReport("gpu-01", iface="-", resolved="127.0.1.1", route="10.2.0.5")
    assert choose_address(loop, interface=None, one_machine=True) == "127.0.1.1"  # one node: loopback is right
    assert choose_address(loop, interface=None, one_machine=False) == "10.2.0.5"  # else the default route's
    with pytest.raises(UserError, match="no IPv4 address on slurm.network_interface ib0"):
        choose_address(AddressReport("gpu-01", "-", "10.0.0.5", "-"), interface="ib0", one_machine=False)
    with pytest.raises(UserError, match="set slurm.network_interface"):
        choose_address(AddressReport("gpu-01", "-", "127.0.1.1", "-"), interface=None, one_machine=False)


def test_the_address_script_run_by_bash_reports_this_machine() -> None:
    done = subprocess.run(["bash", "-c", ADDRESS_SCRIPT, "pdctl-addresses", "lo"], capture_output=True, text=True,
                          timeout=30, check=False, env={"SLURMD_NODENAME": "node-7", "PATH": "/usr/sbin:/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    reports = parse_reports("srun: noise\n" + done.stdout)
    assert list(reports) == ["node-7"]
    report = reports["node-7"]
    assert report.iface == "127.0.0.1"  # the interface asked for
    assert report.resolved == socket.gethostbyname(socket.gethostname())


def test_bind_sets_hosts_and_the_addresses_read_on_the_nodes() -> None:
    topo = topology([None, "gpu-01", None])
    topo = topo.model_copy(update={"nodes": [topo.nodes[0], topo.nodes[1].model_copy(
        update={"advertise_host": "10.9.9.9"}), topo.nodes[2]]})
    bound = bind(topo, {"p0": "gpu-02", "d0": "gpu-01", "d1": "gpu-03"},
                 {"gpu-02": "10.0.0.2", "gpu-03": "10.0.0.3"})
    assert [(n.host, n.address) for n in bound.nodes] == [
        ("gpu-02", "10.0.0.2"), ("gpu-01", "10.9.9.9"), ("gpu-03", "10.0.0.3")]
    assert not any(n.allocated for n in bound.nodes)


def test_in_allocation_outside_one_is_bad_input(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pytest.raises(UserError, match="SLURM_JOB_ID is not set"):
        require_allocation()
