"""Fabric scoping on a fake sysfs tree (the probe's own dump functions read it; the parsers and checks are
pure): GPU-affine HCAs from the PCIe tree, UCX_NET_DEVICES with inactive / management ports, NIXL's self
endpoint, GPU memory registration. The probe and NIXL on this machine: tests/preflight/test_fabric_real.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pdctl.preflight import probe
from pdctl.preflight.checks import fabric
from pdctl.preflight.context import Context
from pdctl.preflight.gather import NodeFacts, node_roles
from pdctl.preflight.parsers.pci_topology import parse_pci
from pdctl.preflight.parsers.ucx_env import dmabuf_missing, parse_net_devices, tcp_allowed
from pdctl.render.deployment import render
from tests.support.topo_factory import make

# An HGX-like box: GPU0 and mlx5_0 behind one PCIe switch (root port 00:01.0), a management ConnectX
# (mlx5_1, RoCE, ACTIVE) and a BlueField function (mlx5_2, DOWN) on a root port of their own.
GPU0 = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:00.0"
NIC0 = "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0"
MGMT = "pci0000:00/0000:00:03.0/0000:05:00.0"
BF3 = "pci0000:00/0000:00:03.0/0000:05:00.1"
IB_STATES = """\
mlx5_0/ports/1/state:4: ACTIVE
mlx5_0/ports/1/link_layer:InfiniBand
mlx5_1/ports/1/state:4: ACTIVE
mlx5_1/ports/1/link_layer:Ethernet
mlx5_2/ports/1/state:1: DOWN
mlx5_2/ports/1/link_layer:Ethernet
"""
IP_ADDR = "1: lo    inet 127.0.0.1/8 scope host lo\n2: eth0    inet 10.0.0.11/24 scope global eth0\n"


def fake_sys(root: Path) -> tuple[Path, Path]:
    """/sys/devices, /sys/class/infiniband and /sys/bus/pci/devices as the kernel lays them out."""
    ib, pci = root / "class" / "infiniband", root / "bus" / "pci" / "devices"
    ib.mkdir(parents=True)
    pci.mkdir(parents=True)
    for rel, vendor, klass, hca, net in ((GPU0, "0x10de", "0x030200", None, None), (NIC0, "0x15b3", "0x020700", "mlx5_0", "ib0"),
                                         (MGMT, "0x15b3", "0x020000", "mlx5_1", "eno1"),
                                         (BF3, "0x15b3", "0x020000", "mlx5_2", None)):
        dev = root / "devices" / rel
        dev.mkdir(parents=True)
        (dev / "vendor").write_text(vendor + "\n")
        (dev / "class").write_text(klass + "\n")
        (pci / rel.rsplit("/", 1)[1]).symlink_to(dev)
        if hca:
            (ib / hca).mkdir()
            (ib / hca / "device").symlink_to(dev)
            if net:
                (dev / "net" / net).mkdir(parents=True)
    return ib, pci


@pytest.fixture()
def pci_text(tmp_path: Path) -> str:
    ib, pci = fake_sys(tmp_path)
    return probe.dump_pci(str(ib), str(pci))


def test_probe_dump_and_parser_find_the_gpu_affine_hca(pci_text: str) -> None:
    topo = parse_pci(pci_text)
    assert set(topo.hcas) == {"mlx5_0", "mlx5_1", "mlx5_2"} and list(topo.gpus) == ["0000:02:00.0"]
    assert topo.hcas["mlx5_0"].netdevs == ("ib0",) and topo.hcas["mlx5_2"].netdevs == ()
    assert topo.affine("mlx5_0") == ["0000:02:00.0"] and topo.affine("mlx5_1") == []
    assert topo.affine_hcas() == {"mlx5_0"}
    # GB200-like: no HCA under a GPU's switch -> affinity unknown (every ACTIVE port counts)
    assert parse_pci("ib mlx5_0 /sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0 ib0\n"
                     "gpu 0008:01:00.0 /sys/devices/pci0008:00/0008:00:00.0/0008:01:00.0\n").affine_hcas() is None


def ctx_for(pci_text: str, env: dict[str, str] | None = None, gdr: dict[str, Any] | None = None,
            tls: str | None = None, node_env: dict[str, Any] | None = None,
            prefill_env: dict[str, str] | None = None) -> Context:
    topo, _ = make(nodes=[{"name": "p0", "host": "10.0.0.11", "gpu": "h100", "gpus": 4},
                          {"name": "d0", "host": "10.0.0.12", "gpu": "h100", "gpus": 4}],
                   engine={"env": {**(env or {}), **({"UCX_TLS": tls} if tls else {})}},
                   prefill={"env": prefill_env or {}})
    facts = {"ib_sysfs": IB_STATES, "pci": pci_text, "ip_addr": {"rc": 0, "out": IP_ADDR, "err": ""},
             "gdr": gdr or {"peermem": True}, "ucx_env": node_env or {"UCX_NET_DEVICES": None, "UCX_TLS": None}}
    per = {n.name: NodeFacts(n.name, "ssh", "python3", 0.1, facts) for n in topo.nodes}
    deployment = render(topo)
    return Context(deployment, None, None, per, node_roles(deployment), "0.1.0")


def checks(ctx: Context, node: str = "p0") -> dict[str, Any]:
    return {c.check: c for n, c in fabric.run(ctx) if n == node}


def test_unset_net_devices_warns_about_inactive_and_management_ports(pci_text: str) -> None:
    got = checks(ctx_for(pci_text))
    nd = got["ucx.net_devices"]
    assert not nd.ok and nd.severity == "warning" and "mlx5_2:1" in nd.message and "mlx5_1:1" in nd.message
    assert nd.fix == "set UCX_NET_DEVICES=mlx5_0:1,lo in engine.env"
    assert got["rdma.gpu_affinity"].ok and got["rdma.gpu_affinity"].found == "mlx5_0:1,lo"
    assert got["ucx.self_endpoint"].ok


def test_listed_devices_inactive_missing_stray_or_rdma_only(pci_text: str) -> None:
    down = checks(ctx_for(pci_text, {"UCX_NET_DEVICES": "mlx5_0:1,mlx5_2:1"}))["ucx.net_devices"]
    assert down.failed and "inactive port(s) mlx5_2:1" in down.message and "NIXL_ERR_BACKEND" in down.message
    stray = checks(ctx_for(pci_text, {"UCX_NET_DEVICES": "mlx5_1:1,lo"}))["ucx.net_devices"]
    assert not stray.ok and stray.severity == "warning" and "not GPU-affine" in stray.message
    good = checks(ctx_for(pci_text, {"UCX_NET_DEVICES": "mlx5_0:1,lo"}))
    assert good["ucx.net_devices"].ok and good["ucx.self_endpoint"].ok
    rdma_only = checks(ctx_for(pci_text, {"UCX_NET_DEVICES": "mlx5_0:1"}))["ucx.self_endpoint"]
    assert not rdma_only.ok and rdma_only.severity == "warning" and "40641" in rdma_only.message
    nothing = checks(ctx_for(pci_text, {"UCX_NET_DEVICES": "mlx5_9:1"}))
    assert nothing["ucx.self_endpoint"].failed and "no active-message transport" in nothing["ucx.self_endpoint"].message
    assert not nothing["ucx.net_devices"].ok and "no such device" in nothing["ucx.net_devices"].message
    # UCX_TLS without tcp: lo does not carry the self endpoint either
    no_tcp = checks(ctx_for(pci_text, {"UCX_NET_DEVICES": "mlx5_0:1,lo"}, tls="rc,cuda_copy"))["ucx.self_endpoint"]
    assert not no_tcp.ok and no_tcp.severity == "warning"
    # the node's own environment counts when engine.env does not set it (and says where it came from)
    from_node = checks(ctx_for(pci_text, node_env={"UCX_NET_DEVICES": "mlx5_2:1", "UCX_TLS": None}))
    assert from_node["ucx.net_devices"].failed and "the node's environment" in from_node["ucx.net_devices"].message


def test_a_roles_own_env_is_what_its_nodes_servers_get(pci_text: str) -> None:
    # prefill.env (issue 27) sets UCX_NET_DEVICES for the prefill servers only: judged on p0, said where it is set
    ctx = ctx_for(pci_text, {"UCX_NET_DEVICES": "mlx5_0:1,lo"}, prefill_env={"UCX_NET_DEVICES": "mlx5_0:1,mlx5_2:1"})
    on_prefill = checks(ctx, "p0")["ucx.net_devices"]
    assert on_prefill.failed and "UCX_NET_DEVICES (prefill.env) lists inactive port(s) mlx5_2:1" in on_prefill.message
    on_decode = checks(ctx, "d0")["ucx.net_devices"]
    assert on_decode.ok and on_decode.message == "UCX_NET_DEVICES=mlx5_0:1,lo (engine.env)"


def test_gpu_memory_registration_names_the_missing_piece(pci_text: str) -> None:
    open_module = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build"
    proprietary = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  570.124.06  Release Build"
    reg = lambda **g: checks(ctx_for(pci_text, gdr=g))["gpu.rdma_registration"]
    assert reg(peermem=True).ok
    assert reg(peermem=False, kernel="6.8.0-45-generic", nvidia_version=open_module).found == "dmabuf"
    bad = reg(peermem=False, kernel="5.15.0-119-generic", nvidia_version=proprietary)
    assert bad.failed and "nvidia_peermem is not loaded" in bad.message and "proprietary" in bad.message
    old = reg(peermem=False, kernel="5.4.0-150-generic", nvidia_version=open_module)
    assert old.failed and "Linux 5.4.0-150-generic is older than 5.12" in old.message
    assert "no NVIDIA kernel module" in reg(peermem=False, kernel="6.8.0", nvidia_version=None).message


def test_cpu_and_tcp_topologies_skip_gpu_checks(pci_text: str) -> None:
    ctx = ctx_for(pci_text)
    ctx.topo.transfer.protocol = "tcp"
    assert "gpu.rdma_registration" not in checks(ctx) and "ucx.net_devices" in checks(ctx)


def test_parsers_of_the_ucx_environment() -> None:
    assert parse_net_devices(None) is None and parse_net_devices("all") is None
    assert [str(d) for d in parse_net_devices("mlx5_0:1, lo ,eth0") or []] == ["mlx5_0:1", "lo", "eth0"]
    assert tcp_allowed(None) and tcp_allowed("tcp,cuda_copy") and tcp_allowed("^rc") and not tcp_allowed("^tcp")
    assert not tcp_allowed("rc_x,cuda_copy")
    assert dmabuf_missing("6.1.0", "NVRM version: NVIDIA UNIX Open Kernel Module for aarch64  580.95.05") == []
