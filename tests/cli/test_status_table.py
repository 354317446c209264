"""`pdctl status`'s process table keeps its detail column readable whatever the URLs: long host names or a
Kubernetes run's cluster DNS names fold instead of squeezing out the detail (the reason a process is down)."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pdctl.cli.status import process_table

LONG = "http://a-rather-long-host-name-of-a-gpu-node.cluster.example.internal"


def shown(doc: dict, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None)
    console.print(process_table(doc, Table))
    return console.export_text()


def test_local_rows_fold_their_urls_and_keep_the_detail() -> None:
    doc = {"topology": "t", "run_dir": "/runs/t", "router": {
        "name": "router", "node": "n0", "pid": 11, "url": f"{LONG}:8000", "healthy": False,
        "detail": "1/2 workers serving (decode-0 exited)"}, "processes": [
        {"name": "prefill-0", "node": "n0", "pid": 12, "url": f"{LONG}:30000", "advertise": "10.0.0.1",
         "healthy": True, "detail": "200"},
        {"name": "decode-0", "node": "n1", "pid": 13, "url": f"{LONG}:30100", "advertise": "10.0.0.2",
         "healthy": False, "detail": "exited"}]}
    text = shown(doc, 100)
    assert "detail" in text and "advertises" in text and "(decode-0 exited)" in text, text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_pod_rows_show_the_pod_its_node_and_restarts() -> None:
    name = "gpt-oss-120b-p1-d4-gb300-k8s"
    doc = {"topology": name, "run_dir": f"/runs/{name}", "router": {
        "name": "router", "node": "p0", "pid": None, "pod": f"{name}-router-7f9c", "k8s_node": "gb300-a",
        "restarts": 0, "url": f"http://{name}-router.ns.svc:8000", "healthy": True, "detail": "1/1 workers serving"},
        "processes": [{"name": "decode-0", "node": "d0", "pid": None, "pod": f"{name}-decode-0",
                       "k8s_node": "gb300-b", "restarts": 3, "url": f"http://{name}-decode-0.{name}-decode.ns:30100",
                       "healthy": False, "detail": "CrashLoopBackOff (exit 1, 3 restarts)"}]}
    text = shown(doc, 100)
    for header in ("pod", "k8s node", "restarts", "healthy", "detail"):
        assert header in text, text
    assert "CrashLoopBackOff" in text and "gb300-b" in text and "pid" not in text.split("\n")[2], text


def test_gpu_lines_say_what_each_node_has_and_when_none_were_seen() -> None:
    from pdctl.cli.status import gpu_lines
    from pdctl.metrics.gpu import from_dcgm, node_document

    t4 = (Path(__file__).parents[1] / "metrics" / "data" / "dcgm-exporter-t4-loaded.prom").read_text()
    lines = gpu_lines({"g0": node_document("dcgm-exporter", from_dcgm(t4)),
                       "c0": node_document(None, [], "CPU node (gpu: cpu): no GPUs")})
    assert lines[0].startswith("GPUs on g0 (dcgm-exporter): 1 device(s), util 91% (max 91%), engine active 16%")
    assert "memory 5.0/15 GiB" in lines[0] and "PCIe 0.01 GB/s" in lines[0]
    assert lines[1] == "GPUs on c0: none seen — CPU node (gpu: cpu): no GPUs" and len(lines) == 2
    cpu_only = gpu_lines({"c0": node_document(None, [], "CPU node (gpu: cpu): no GPUs")})
    assert cpu_only[-1] == "No GPUs were seen on any node of this run."


def test_bottleneck_lines_show_the_verdict_and_its_evidence() -> None:
    from pdctl.cli.status import bottleneck_lines

    lines = bottleneck_lines({"verdict": "kv-bound", "role": "decode", "samples": 3,
                              "evidence": ["decode KV pool 97% used (>= 90%)"],
                              "roles": {"decode": {"verdict": "kv-bound", "evidence": []},
                                        "prefill": {"verdict": "none", "evidence": []}}})
    assert lines == ["bottleneck: [yellow]kv-bound[/] (decode) over 3 sample(s)",
                     "  - decode KV pool 97% used (>= 90%)", "  prefill: none"]
    assert bottleneck_lines(None) == []
