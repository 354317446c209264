"""`pdctl status`'s process table keeps its detail column readable whatever the URLs: long host names or a
Kubernetes run's cluster DNS names fold instead of squeezing out the detail (the reason a process is down)."""

from __future__ import annotations

import io

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
