"""`pdctl bench-transfer --stack sglang` end to end: SGLang 0.5.23's own KV managers, senders, receivers and
bootstrap server (two processes in SGLang's interpreter) move one request at the topology's shape; the JSON is
CLI.md's round-3 document; a topology check-compat rejects is refused, and with --skip-compat it fails live as
predicted, with SGLang's own message and the same stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.e2e  # SGLang's stack, real NIXL and Mooncake

CONFIG = REPO / "benchmarks" / "bench_transfer.yaml"
CONTRACT = {"ok", "stack", "backend", "verified", "gbps", "descriptors", "transport", "compat_ok",
            "agrees_with_compat", "stage", "error"}


def _run(python: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pdctl", "bench-transfer", *args], capture_output=True, text=True,
                          check=False, timeout=timeout, cwd=REPO, env={**os.environ, "PDCTL_SGLANG_PYTHON": python})


def test_sglang_stack_moves_every_byte_of_the_gpt_oss_shape(sglang_stack_python):
    res = _run(sglang_stack_python, str(CONFIG), "--stack", "sglang", "--tokens", "256", "--repeats", "2",
               "--json", "-")
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert CONTRACT <= set(doc)
    assert doc["ok"] and doc["stack"] == "sglang" and doc["verified"] and doc["agrees_with_compat"]
    assert doc["sglang_version"] == "0.5.23" and doc["memory"] == "DRAM"
    assert (doc["prefill_tp"], doc["decode_tp"], doc["full_layers"], doc["swa_layers"]) == (2, 1, 12, 12)
    assert doc["stage"] is None and doc["error"] is None and doc["mismatched_bytes"] == 0
    # SGLang's head slices: one descriptor per token per layer-K/V per rank pair (pdctl.plan's count: 4 full
    # pages x 12 layers + 2 window pages x 12 SWA layers, 64 tokens a page, K and V, 2 pairs) plus its aux rows
    assert doc["descriptors"] > 2 * 2 * (12 * 4 + 12 * 2) * 64
    assert doc["bytes"] == 2 * 2 * (12 * 4 + 12 * 2) * 64 * 4 * 64 * 2  # the decode rank's 8 heads, bf16
    assert doc["gbps"] > 0 and doc["memcpy_gbps"] > 0 and len(doc["runs_seconds"]) == 2
    assert doc["transport"].startswith("ucx ")  # UCX's own protocol table named the lanes
    assert any("NIXL on host memory" in b for b in doc["guards_bypassed"])  # said plainly
    assert "CPU rehearsal" in res.stderr and "agrees" in res.stderr


def test_a_rejected_topology_is_refused_then_fails_live_as_predicted(sglang_stack_python, tmp_path):
    bad = tmp_path / "page-mismatch.yaml"
    bad.write_text(CONFIG.read_text().replace("  tp: 1\n", "  tp: 1\n  page_size: 32\n"))
    refused = _run(sglang_stack_python, str(bad), "--stack", "sglang", "--backend", "mooncake", "--json", "-",
                   timeout=120)
    assert refused.returncode == 1, refused.stderr[-2000:]
    doc = json.loads(refused.stdout)
    assert doc["refused"] and not doc["ok"] and doc["predicted_stage"] == "handshake"
    assert "page-size-match" in doc["error"] and "--skip-compat" in doc["error"]
    live = _run(sglang_stack_python, str(bad), "--stack", "sglang", "--backend", "mooncake", "--tokens", "128",
                "--skip-compat", "--json", "-")
    assert live.returncode == 1, live.stderr[-3000:]
    doc = json.loads(live.stdout)
    assert not doc["ok"] and not doc["verified"] and doc["stage"] == "handshake" and doc["agrees_with_compat"]
    assert "Page size mismatch: prefill server has page_size=64, but decode server has page_size=32" in doc["error"]
    assert "as check-compat predicted" in " ".join(live.stderr.split())


def test_no_sglang_interpreter_is_bad_input(tmp_path):
    named = tmp_path / "named.yaml"  # engine.python names the interpreter: only that one is tried
    named.write_text(CONFIG.read_text().replace('  version: "0.5.23"', '  version: "0.5.23"\n  python: /nonexistent/py'))
    res = _run("/nonexistent/python", str(named), "--stack", "sglang", timeout=120)
    assert res.returncode == 2 and "Traceback" not in res.stderr
    assert "make sglang-env" in " ".join(res.stderr.split())


def test_transfer_protocol_tcp_holds_on_sglang_stack(sglang_stack_python):
    # configs/local-cpu.yaml says `transfer.protocol: tcp`: SGLang's senders get the UCX_TLS a launch gives
    # prefill (issue 20 item 7 for launch and preflight), so UCX reports tcp lanes, not shared memory (cma)
    res = _run(sglang_stack_python, str(REPO / "configs" / "local-cpu.yaml"), "--stack", "sglang", "--tokens", "128",
               "--repeats", "1", "--json", "-")
    assert res.returncode == 0, res.stderr[-3000:]
    doc = json.loads(res.stdout)
    assert doc["verified"] and "tcp/" in doc["transport"] and "cma" not in doc["transport"], doc["transport"]
