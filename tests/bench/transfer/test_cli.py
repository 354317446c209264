"""`pdctl bench-transfer` end to end (real ranks in two processes, real backends), small request sizes."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.paths import REPO

pytestmark = pytest.mark.e2e  # real transfer backends

CONFIG = REPO / "benchmarks" / "bench_transfer.yaml"


def _run(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pdctl", "bench-transfer", *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        cwd=REPO,
    )


@pytest.mark.parametrize("backend", ["nixl", "mooncake"])
def test_bench_transfer_verifies_every_byte_and_reports_ratios(backend):
    res = _run(str(CONFIG), "--backend", backend, "--tokens", "256", "--repeats", "2", "--json", "-")
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(res.stdout)
    assert doc["ok"] and doc["backend"] == backend and doc["prefill_tp"] == 2 and doc["decode_tp"] == 1
    # CLI.md round 3: the same keys on pdctl's stack (gbps/descriptors: SGLang's per-token path, as pdctl runs it)
    assert doc["stack"] == "pdctl" and doc["verified"] and doc["agrees_with_compat"] and doc["compat_ok"]
    assert doc["stage"] is None and doc["error"] is None and doc["gbps"] == doc["paths"]["per_token"]["gbps"]
    tok, packed = doc["paths"]["per_token"], doc["paths"]["packed"]
    # gpt-oss shape, page 64, 256 tokens: 4 full pages x 12 full layers + 2 window pages x 12 SWA layers,
    # K and V, 2 prefill ranks each sending 4 of 8 heads (4 x 64 x 2 B = 512 B per token).
    assert tok["kind"] == "head-slice" and tok["descriptors"] == 2 * 2 * (12 * 4 + 12 * 2) * 64
    assert tok["bytes"] == packed["bytes"] == tok["descriptors"] * 512
    assert packed["descriptors"] == 2 * 2 * (12 + 12)  # one per page run per layer-K/V per rank pair
    assert (
        tok["verified"] and packed["verified"] and tok["mismatched_bytes"] == packed["mismatched_bytes"] == 0
    )
    assert doc["memcpy_gbps"] > 0 and packed["ratio_to_memcpy"] > 0
    # 2 rounds side by side: each path twice, memcpy before/between/after; the best of each is reported
    assert len(tok["runs_gbps"]) == len(packed["runs_gbps"]) == 2 and len(doc["memcpy_runs_gbps"]) == 6
    assert packed["gbps"] == max(packed["runs_gbps"]) and doc["memcpy_gbps"] == max(doc["memcpy_runs_gbps"])
    assert "memcpy" in res.stderr  # human output goes to stderr with --json -


def test_bench_transfer_bad_input_exits_2(tmp_path):
    res = _run(str(tmp_path / "missing.yaml"))
    assert res.returncode == 2
    assert "Traceback" not in res.stderr
    res = _run(str(CONFIG), "--tokens", "0")
    assert res.returncode == 2 and "Traceback" not in res.stderr
    # a colocated topology has no KV transfer to measure (issue 16: it ended in an AttributeError traceback)
    res = _run(str(REPO / "configs" / "local-cpu-reference.yaml"))
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr
    assert "colocated" in res.stderr, res.stderr
    # a request longer than the deployment's context length cannot exist
    short = tmp_path / "short.yaml"
    short.write_text(CONFIG.read_text().replace("  hybrid_swa_memory: true", "  hybrid_swa_memory: true\n  context_length: 128"))
    res = _run(str(short), "--tokens", "256")
    assert res.returncode == 2 and "exceeds the topology's context_length 128" in res.stderr, res.stderr
    # a request whose KV cannot fit in memory is refused before anything is allocated (not the OOM killer)
    res = _run(str(CONFIG), "--tokens", "1000000000")
    assert res.returncode == 2 and "GiB are available" in " ".join(res.stderr.split()), res.stderr
