"""Topologies for launch tests: the local CPU deployment with free ports, and SGLang variants."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from tests.support.net import free_port

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))


def local_cpu(
    tmp: Path, checkpoint: Path, *, name: str = "launch-test", ssh: dict | None = None, **overrides: Any
) -> Path:
    """configs/local-cpu.yaml rewritten for a test: free ports, the test checkpoint, this interpreter;
    OVERRIDES are merged into the top-level sections (dicts merge one level deep)."""
    doc = yaml.safe_load((REPO / "configs" / "local-cpu.yaml").read_text())
    doc["name"] = name
    doc["engine"]["python"] = sys.executable
    doc["model"] = {"path": str(checkpoint)}
    doc["nodes"][0]["ssh"] = ssh
    doc["transfer"]["bootstrap_port"] = free_port()
    doc["prefill"]["port"] = free_port()
    doc["decode"]["port"] = free_port()
    doc["router"]["port"] = free_port()
    doc["router"]["metrics_port"] = free_port()
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(doc.get(key), dict):
            doc[key] = {**doc[key], **value}
        else:
            doc[key] = value
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def slurm_variant(config: Path, tmp: Path, **slurm: Any) -> Path:
    """CONFIG as a Slurm cluster would write it: nodes without host (the job assigns them) and a slurm:
    section (partition, time limit; SLURM overrides)."""
    doc = yaml.safe_load(config.read_text())
    for node in doc["nodes"]:
        for key in ("host", "ssh", "advertise_host"):
            node.pop(key, None)
    doc["slurm"] = {"partition": "gpu", "time_limit": "01:00:00", **slurm}
    path = tmp / f"slurm-{config.name}"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


SGLANG_BASE = """\
name: variant
engine: {kind: sglang, version: "0.5.23", python: /opt/venv/bin/python}
model: {path: openai/gpt-oss-120b, revision: main}
nodes:
  - {name: p0, host: 10.0.0.11, gpu: h100, gpus: 8, ib_devices: [mlx5_0, mlx5_1]}
  - {name: d0, host: 10.0.0.12, gpu: h100, gpus: 8}
  - {name: d1, host: 10.0.0.13, gpu: h100, gpus: 8}
transfer: {backend: nixl, protocol: rdma, staging_buffer: true, bootstrap_port: 8998}
server:
  page_size: 64
  kv_cache_dtype: fp8_e4m3
  hybrid_swa_memory: false
  unified_memory: true
  attention_backend: triton
  chunked_prefill_size: 8192
  context_length: 32768
  max_total_tokens: 100000
  mem_fraction_static: 0.8
  random_seed: 7
  args: {enable-metrics: true, log-level: info, cuda-graph-bs-decode: [1, 2, 4], disable-radix-cache: false}
prefill: {nodes: [p0], replicas: 2, tp: 4, port: 30000}
decode: {nodes: [d0, d1], tp: 16, dp: 16, enable_dp_attention: true, port: 30100, radix_cache: true}
router: {node: p0, port: 8000, policy: round_robin, args: {log-level: debug}}
"""


def local_cpu_reference(tmp: Path, checkpoint: Path, *, name: str = "launch-ref-test", **overrides: Any) -> Path:
    """configs/local-cpu-reference.yaml (one colocated TP1 server behind the router) rewritten for a test: free
    ports, the test checkpoint, this interpreter; OVERRIDES merged into the top-level sections as local_cpu's."""
    doc = yaml.safe_load((REPO / "configs" / "local-cpu-reference.yaml").read_text())
    doc["name"] = name
    doc["engine"]["python"] = sys.executable
    doc["model"] = {"path": str(checkpoint)}
    doc["colocated"]["port"] = free_port()
    doc["router"]["port"] = free_port()
    doc["router"]["metrics_port"] = free_port()
    for key, value in overrides.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) and isinstance(doc.get(key), dict) else value
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path
def sglang_on_slurm(hosts: list[str | None], slurm: dict[str, Any], **over: Any) -> Any:
    """SGLANG_BASE (nodes p0, d0, d1) for Slurm: HOSTS per node (None: left out, the job assigns it), a slurm:
    section, OVER replacing top-level sections; the loaded Topology."""
    from pdctl.topology import load_topology_text

    doc = yaml.safe_load(SGLANG_BASE)
    for node, host in zip(doc["nodes"], hosts):
        if host is None:
            node.pop("host")
        else:
            node["host"] = host
    doc["slurm"] = slurm
    doc.update(over)
    return load_topology_text(yaml.safe_dump(doc, sort_keys=False))
