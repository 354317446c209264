"""Topology texts shared by the topology tests (a minimal valid file and a fuller one)."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS = sorted((REPO / "configs").glob("*.yaml"))

MINIMAL = """\
name: minimal
model:
  path: openai/gpt-oss-20b
nodes:
  - name: n0
    host: 10.0.0.1
    gpu: h100
    gpus: 8
prefill:
  nodes: [n0]
decode:
  nodes: [n0]
"""

FULL = """\
name: full-example
engine:
  kind: sglang
  version: "0.5.23"
  python: /usr/bin/python3
  env: {NCCL_DEBUG: INFO, SGLANG_X: 1}
model:
  path: openai/gpt-oss-120b
  preset: gpt-oss-120b
nodes:
  - name: p0
    host: 10.0.0.11
    gpu: gb300
    gpus: 4
    ssh: {user: ubuntu, port: 2222, key: ~/.ssh/id_ed25519, options: [StrictHostKeyChecking=no]}
    ib_devices: [mlx5_0, mlx5_1]
  - name: d0
    host: 10.0.0.12
    gpu: gb300
    gpus: 4
transfer:
  backend: mooncake
  protocol: rdma
  ib_device: mlx5_0
  staging_buffer: true
  bootstrap_port: 9000
server:
  page_size: 32
  attention_backend: trtllm_mha
  chunked_prefill_size: 4096
  args: {enable-metrics: true, --max_running_requests: 64}
prefill:
  nodes: [p0]
  tp: 1
  page_size: 32
  attention_backend: null
  mem_fraction_static: 0.8
  args: {enable-metrics: false}
decode:
  nodes: [d0]
  tp: 4
  dp: 2
  enable_dp_attention: true
  radix_cache: true
  kv_layout: hnd
router:
  node: d0
  port: 8100
  policy: round_robin
eval:
  gsm8k: {num_questions: 50, floor: 0.9}
  parity: {tolerance: 0.1}
"""

COLOCATED = """\
name: colocated-example
mode: colocated
model:
  path: openai/gpt-oss-20b
nodes:
  - name: a
    host: 10.0.0.1
    gpu: h100
    gpus: 4
  - name: b
    host: 10.0.0.2
    gpu: h100
    gpus: 4
transfer:
  backend: mooncake
server:
  page_size: 32
  attention_backend: fa3
  args: {enable-metrics: true, max-running-requests: 64}
colocated:
  nodes: [a, b]
  replicas: 3
  tp: 2
  port: 31500
  attention_backend: null
  mem_fraction_static: 0.7
  args: {enable-metrics: false}
"""
