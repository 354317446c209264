"""GPU telemetry of a run's nodes for `pdctl status [--watch]`: each node's dcgm-exporter when it runs one (its
Prometheus text at http://NODE:9400/metrics, $PDCTL_DCGM_PORT to change the port), else `nvidia-smi -q` run
on the node through its executor (ssh, srun, ...), parsed by preflight's parser (the one parser of that text);
on a CPU node (`gpu: cpu`) nothing is asked and the node says so. The maths: pdctl.metrics.gpu.

Why the exporter first: it is what GPU clusters already run for Prometheus, it costs the node nothing to read,
and it has the fields nvidia-smi lacks (tensor-core activity, NVLink and PCIe traffic, the last XID). Why HTTP
from here: as the engines' metrics are read (pdctl.metrics.scrape), no remote shell is needed for it.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import requests

from pdctl.executors import node_executor
from pdctl.metrics import names as N
from pdctl.metrics.gpu import Device, from_dcgm, from_nvidia_smi, node_document, with_rates
from pdctl.preflight.parsers.nvidia_smi import parse_nvidia_smi_q
from pdctl.render.kinds import kind_of_records
from pdctl.topology.placement import host_for_url

DCGM_TIMEOUT_S = 2.0
SMI_TIMEOUT_S = 15.0
PORT_ENV = "PDCTL_DCGM_PORT"
NO_GPUS = "CPU node (gpu: cpu): no GPUs"


def executor_kind(state: dict[str, Any]) -> str:
    """The deployment's executor kind (pdctl.render.kinds) from its processes' executors."""
    return kind_of_records(state.get("processes", []))


class GpuWatch:
    """Reads every node's GPUs; keeps each node's last devices so that counters become rates (status --watch)."""

    def __init__(self, topo: Any, kind: str) -> None:
        self.topo, self.kind = topo, kind
        self.port = int(os.environ.get(PORT_ENV) or N.DCGM_PORT)
        self._last: dict[str, tuple[float, list[Device]]] = {}

    def sample(self) -> dict[str, dict[str, Any]]:
        """Node name -> its telemetry document (pdctl.metrics.gpu.node_document)."""
        nodes = list(self.topo.nodes)
        with ThreadPoolExecutor(max_workers=max(1, min(8, len(nodes)))) as pool:
            return dict(zip([n.name for n in nodes], pool.map(self._node, nodes)))

    def _node(self, node: Any) -> dict[str, Any]:
        if node.gpu == "cpu":
            return node_document(None, [], NO_GPUS)
        now = time.monotonic()
        text, why_not = self._dcgm(node)
        if text is not None:
            try:
                devices = from_dcgm(text, now)
            except ValueError as exc:
                devices, why_not = [], f"dcgm-exporter answered no Prometheus text ({exc})"
            if devices:
                last_at, last = self._last.get(node.name, (now, []))
                devices = with_rates(devices, last, now - last_at)
                self._last[node.name] = (now, devices)
                return node_document("dcgm-exporter", devices)
        return self._nvidia_smi(node, why_not)

    def _dcgm(self, node: Any) -> tuple[str | None, str]:
        url = f"http://{host_for_url(node.address)}:{self.port}/metrics"
        try:
            response = requests.get(url, timeout=DCGM_TIMEOUT_S)
        except requests.RequestException as exc:
            return None, f"no dcgm-exporter at {url} ({type(exc).__name__})"
        if response.status_code != 200:
            return None, f"{url}: HTTP {response.status_code}"
        return response.text, f"{url} exports no DCGM_FI_ field"

    def _nvidia_smi(self, node: Any, why_not: str) -> dict[str, Any]:
        try:
            done = node_executor(node, kind=self.kind, topo=self.topo).run(["nvidia-smi", "-q"], timeout=SMI_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 -- an executor that runs no commands (kubernetes), ssh down: said
            return node_document(None, [], f"{why_not}; nvidia-smi not run: {exc}")
        if done.returncode != 0:
            said = (done.stderr or done.stdout or "").strip().splitlines()[-1:] or ["timed out"]
            return node_document(None, [], f"{why_not}; nvidia-smi -q failed ({said[0][:160]})")
        devices = from_nvidia_smi(parse_nvidia_smi_q(done.stdout))
        if not devices:
            return node_document(None, [], f"{why_not}; nvidia-smi -q lists no GPU")
        return node_document("nvidia-smi", devices)
