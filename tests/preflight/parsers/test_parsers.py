"""The tool-output parsers on outputs captured from real machines (tests/preflight/data, each file names its
source): nvidia-smi -q, ucx_info -d, /sys/class/infiniband, ip, UCX_PROTO_INFO tables, Mooncake's log."""

from __future__ import annotations

from pathlib import Path

from pdctl.preflight.parsers.ib_sysfs import parse_ib_sysfs
from pdctl.preflight.parsers.iproute import parse_ip_addr, parse_ip_route_get
from pdctl.preflight.parsers.mooncake_log import parse_mooncake_log
from pdctl.preflight.parsers.nvidia_smi import Fabric, parse_nvidia_smi_q
from pdctl.preflight.parsers.ucx_info import parse_ucx_info, transports_for
from pdctl.preflight.parsers.ucx_proto import config_lanes, parse_proto_info, write_path
from pdctl.preflight.probe import dump_sysfs

DATA = Path(__file__).resolve().parents[1] / "data"


def read(name: str) -> str:
    return (DATA / name).read_text()


def test_nvidia_smi_h100_hgx_inventory_and_no_nvlink_domain() -> None:
    inv = parse_nvidia_smi_q(read("nvidia-smi-q-h100-hgx.txt"))
    assert (inv.driver_version, inv.cuda_version) == ("565.57.01", "12.7")
    assert len(inv.gpus) == 8 and inv.kinds == ["h100"]
    first = inv.gpus[0]
    assert (first.bus_id, first.name, first.memory_mib) == ("00000000:18:00.0", "NVIDIA H100 80GB HBM3", 81559)
    assert first.uuid == "GPU-b42dd28e-ffdd-8720-1df0-98bd8cdc05b1"
    assert first.fabric == Fabric("Completed", "Success", "0", "00000000-0000-0000-0000-000000000000")
    # registered with the board's NVSwitches, but an all-zero ClusterUUID is no multi-node NVLink domain
    assert inv.domains == set()


def test_nvidia_smi_failed_gb_fabric_registration_is_no_domain() -> None:
    block = "\n".join("    " + line for line in read("nvidia-smi-q-fabric-gb200-excerpt.txt").splitlines()
                      if not line.startswith("#"))
    inv = parse_nvidia_smi_q("Driver Version : 570.00\nGPU 00000008:01:00.0\n    Product Name : NVIDIA GB200\n"
                             + block)
    (gpu,) = inv.gpus
    assert gpu.kind == "gb200" and gpu.fabric.status == "Insufficient Resources" and gpu.fabric.domain is None


def test_fabric_domain_of_a_registered_nvl72_gpu() -> None:
    # values NVML reported on a real GB200 NVL72 node (https://github.com/leptonai/gpud/pull/1106)
    fabric = Fabric("Completed", "Success", "4026", "9c6f5af3-53bf-49b5-a436-b66766c413c3")
    assert fabric.domain == ("9c6f5af3-53bf-49b5-a436-b66766c413c3", "4026")
    assert Fabric("In Progress", None, "4026", "9c6f5af3-53bf-49b5-a436-b66766c413c3").domain is None


def test_gpu_kinds_from_product_names() -> None:
    names = {"NVIDIA GB300 NVL": "gb300", "NVIDIA GB200": "gb200", "NVIDIA B200": "b200", "NVIDIA H200": "h200",
             "NVIDIA H100 80GB HBM3": "h100", "NVIDIA A100-SXM4-80GB": "other"}
    for name, kind in names.items():
        inv = parse_nvidia_smi_q(f"GPU 00000000:01:00.0\n    Product Name : {name}\n")
        assert inv.gpus[0].kind == kind, name


def test_ucx_info_cpu_listing() -> None:
    resources = parse_ucx_info(read("ucx_info-d-cpu-tcp.txt"))
    assert [r.name for r in resources] == ["self/memory0", "tcp/lo", "tcp/pd0", "sysv/memory", "posix/memory",
                                           "cma/memory"]
    assert [r.name for r in transports_for(resources, "tcp")] == ["tcp/pd0"]  # loopback carries no KV between nodes
    assert transports_for(resources, "rdma") == []


def test_ucx_info_ib_listings_both_layouts() -> None:
    text = read("ucx_info-d-ib-excerpts.txt")
    resources = parse_ucx_info(text)
    assert ("mlx5_0", "rc_verbs", "mlx5_0:1", "network") in [(r.memory_domain, r.transport, r.device, r.type)
                                                             for r in resources]
    assert [r.device for r in resources if r.transport == "tcp"] == ["virbr0", "ib0", "enp7s0f0"]
    assert [r.name for r in transports_for(resources, "rdma")] == ["rc_verbs/mlx5_0:1"]


def test_ib_sysfs_h100_node() -> None:
    devices = parse_ib_sysfs(read("ib-sysfs-h100.txt"))
    assert sorted(devices) == ["mlx5_0", "mlx5_1", "mlx5_4", "mlx5_5", "mlx5_6", "mlx5_7", "mlx5_8", "mlx5_9",
                               "mlx5_bond_0"]
    port = devices["mlx5_0"].ports["1"]
    assert (port.state, port.phys_state, port.link_layer, port.rate_gbps) == ("ACTIVE", "LinkUp", "InfiniBand", 400.0)
    assert devices["mlx5_0"].hca_type == "MT4129" and devices["mlx5_bond_0"].ports["1"].link_layer == "Ethernet"
    assert all(d.active for d in devices.values())


def test_probe_sysfs_dump_round_trips(tmp_path: Path) -> None:
    """The probe's dump of a tree written from the captured lines gives those lines back."""
    lines = [line for line in read("ib-sysfs-h100.txt").splitlines() if line and not line.startswith("#")]
    for line in lines:
        path, value = line.split(":", 1)
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(value + "\n")
    assert dump_sysfs(str(tmp_path)).splitlines() == lines
    (tmp_path / "mlx5_0/ports/1/state").write_text("1: DOWN\n")  # the kernel's spelling of a down port
    assert not parse_ib_sysfs(dump_sysfs(str(tmp_path)))["mlx5_0"].active


def test_iproute_of_a_namespaced_host() -> None:
    text = read("iproute-namespaced-host.txt")
    head, peer, own = text.split("## ")
    addrs = parse_ip_addr(head)
    assert set(addrs) == {"lo", "pd0"} and addrs["pd0"][0].startswith("10.213.")
    route = parse_ip_route_get(peer)
    assert route.device == "pd0" and route.source == addrs["pd0"][0] and not route.loopback
    assert parse_ip_route_get(own).loopback
    assert parse_ip_route_get("RTNETLINK answers: Network is unreachable") is None


def test_ucx_proto_info_nixl_over_tcp_between_hosts() -> None:
    tables = parse_proto_info(read("ucx-proto-info-nixl-tcp.txt"))
    writes = [t for t in tables if t.is_write]
    assert {t.locality for t in writes} == {"self", "inter-node"}
    inter = next(t for t in writes if t.locality == "inter-node")
    assert inter.rows == [("0..inf", "zero-copy", "tcp/pd0")]
    path = write_path(read("ucx-proto-info-nixl-tcp.txt"))
    assert path.lanes == ["tcp/pd0"] and path.crosses_nodes and path.describe() == "tcp/pd0 (inter-node)"


def test_ucx_proto_info_one_machine_is_not_crossing() -> None:
    local = read("ucx-proto-info-nixl-tcp.txt").replace("inter-node", "intra-node").replace("tcp/pd0", "cma/memory")
    path = write_path(local)
    assert path.lanes == ["cma/memory"] and not path.crosses_nodes
    assert write_path("no tables here") is None


def test_ucx_proto_info_mlx5_excerpts() -> None:
    tables = parse_proto_info(read("ucx-proto-info-mlx5-excerpts.txt"))
    assert [(t.endpoint, t.locality, t.operation[:14]) for t in tables] == [
        ("perftest", "inter-node", "active message"), ("perftest", "inter-node", "active message")]
    assert tables[1].lanes() == ["rc_mlx5/mlx5_bond_0:1"]
    assert config_lanes("50% on rc_mlx5/mlx5_0:1 and 50% on rc_mlx5/mlx5_2:1") == ["rc_mlx5/mlx5_0:1",
                                                                                    "rc_mlx5/mlx5_2:1"]


def test_mooncake_log_tcp() -> None:
    setups = parse_mooncake_log(read("mooncake-tcp-init.txt"))
    assert len(setups) == 2
    assert all(s.transport == "tcp" and s.hcas == 0 and s.rpc_address.startswith("10.213.") for s in setups)
