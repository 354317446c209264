"""GPU telemetry parsing and aggregation on captured texts (tests/metrics/data/README.md says where each is from):
a dcgm-exporter on 8 A800s with GPU 0 in three MIG instances, one on a loaded T4 with the profiling fields, and
preflight's captured `nvidia-smi -q` of an 8-GPU H100 HGX node (parsed by preflight's one parser)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pdctl.metrics.gpu import clean_exposition, from_dcgm, from_nvidia_smi, node_document, summary, with_rates
from pdctl.metrics.scrape import parse
from pdctl.preflight.parsers.nvidia_smi import parse_nvidia_smi_q

DATA = Path(__file__).parent / "data"
A800 = (DATA / "dcgm-exporter-a800-mig-excerpt.prom").read_text()
T4 = (DATA / "dcgm-exporter-t4-loaded.prom").read_text()
H100_SMI = (Path(__file__).parents[1] / "preflight" / "data" / "nvidia-smi-q-h100-hgx.txt").read_text()


def test_the_exporters_conversion_errors_do_not_sink_the_scrape() -> None:
    with pytest.raises(ValueError):
        parse(A800, 0.0)  # prometheus-client rejects the whole text for one `ERROR - ...` value
    cleaned = clean_exposition(A800)
    assert "FAILED TO CONVERT" not in cleaned and parse(cleaned, 0.0).has("DCGM_FI_DEV_FB_USED")
    assert len(cleaned.splitlines()) == len(A800.splitlines()) - 2  # only the two unreadable samples went


def test_every_mig_instance_and_gpu_is_a_device() -> None:
    devices = from_dcgm(A800)
    assert [d.name for d in devices] == ["GPU 0 MIG 3", "GPU 0 MIG 5", "GPU 0 MIG 6",
                                         *(f"GPU {i}" for i in range(1, 8))]
    mig = devices[0]
    assert (mig.memory_used_mib, mig.memory_total_mib) == (10, 19957 + 10)  # per instance, 2g.20gb
    assert mig.util_pct is None  # the exporter reports no GPU_UTIL for a MIG'd GPU
    assert devices[3].util_pct == 0 and devices[3].memory_total_mib == 81226 + 2
    s = summary(devices)
    assert (s["devices"], s["mig_instances"]) == (10, 3)
    assert s["memory_used_mib"] == 3 * 10 + 7 * 2  # every label set summed, not the last one read
    assert s["memory_total_mib"] == 3 * 19967 + 7 * 81228
    assert s["util_pct_mean"] == 0 and s["xid"] == {} and s["throttled"] == {}


def test_a_loaded_gpu_with_the_profiling_fields() -> None:
    (t4,) = from_dcgm(T4)
    assert (t4.util_pct, t4.memory_used_mib, t4.model) == (91, 5120, "Tesla T4")
    assert (t4.engine_active, t4.tensor_active) == (0.156205, 0.005822)
    assert t4.pcie_bytes_s == 4791810 + 6935930  # bytes/s, tx + rx
    assert node_document("dcgm-exporter", [t4])["summary"]["util_pct_max"] == 91


def test_xid_throttling_and_counter_rates() -> None:
    labels = '{gpu="1",UUID="GPU-9e5b8fec-61bf-5124-a0a9-079af1b65cc6",device="nvidia1"}'
    before = from_dcgm(A800 + f"DCGM_FI_DEV_PCIE_TX_THROUGHPUT{labels} 1000\n")
    after = from_dcgm(A800 + f"DCGM_FI_DEV_PCIE_TX_THROUGHPUT{labels} 3048\n"
                             f"DCGM_FI_DEV_CLOCKS_EVENT_REASONS{labels} 69\n")  # 0x40 | 0x4 | 0x1 (idle: no throttle)
    xid = re.sub(r'(DCGM_FI_DEV_XID_ERRORS\{gpu="7"[^}]*\}) 0', r"\1 79", A800)
    assert summary(from_dcgm(xid))["xid"] == {"GPU 7": 79}
    rated = with_rates(after, before, 2.0)
    gpu1 = rated[3]
    assert gpu1.name == "GPU 1" and gpu1.pcie_bytes_s == (3048 - 1000) * 1024 / 2.0
    assert gpu1.throttle == ["sw power cap", "hw thermal slowdown"]
    assert summary(rated)["throttled"] == {"GPU 1": ["sw power cap", "hw thermal slowdown"]}
    assert rated[4].pcie_bytes_s is None  # no counter: no rate, not 0


def test_a_counter_that_went_down_gives_no_rate() -> None:
    labels = '{gpu="0",UUID="GPU-x"}'
    before = from_dcgm(f"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{labels} 500\n")
    after = from_dcgm(f"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{labels} 100\n")
    assert with_rates(after, before, 1.0)[0].nvlink_bytes_s is None
    again = from_dcgm(f"DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL{labels} 900\n")
    assert with_rates(again, after, 2.0)[0].nvlink_bytes_s == 400


def test_nvidia_smi_eight_gpus_through_preflights_parser() -> None:
    devices = from_nvidia_smi(parse_nvidia_smi_q(H100_SMI))
    assert len(devices) == 8 and all(d.util_pct == 0.0 for d in devices)
    assert {d.memory_used_mib for d in devices} == {1} and {d.memory_total_mib for d in devices} == {81559}
    s = summary(devices)
    assert s["memory_used_mib"] == 8 and s["memory_total_mib"] == 8 * 81559 and s["throttled"] == {}
    assert s["tensor_active_mean"] is None  # nvidia-smi has no tensor activity: unknown, not 0


def test_nvidia_smi_throttling_and_mig_mode() -> None:
    text = H100_SMI.replace("        SW Power Cap                      : Not Active",
                            "        SW Power Cap                      : Active", 1)
    text = text.replace("        Current                           : Disabled", "        Current                           : Enabled", 1)
    inv = parse_nvidia_smi_q(text)
    assert inv.gpus[0].throttle == ("sw power cap",) and inv.gpus[1].throttle == ()
    assert inv.gpus[0].mig and not inv.gpus[1].mig
    assert summary(from_nvidia_smi(inv))["throttled"] == {"GPU 0": ["sw power cap"]}


def test_no_gpus_is_said() -> None:
    doc = node_document(None, [], "CPU node (gpu: cpu): no GPUs")
    assert doc == {"source": None, "why": "CPU node (gpu: cpu): no GPUs", "summary": None, "devices": []}
