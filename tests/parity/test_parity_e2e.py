"""`pdctl parity` end to end: the reference engine in PD (prefill TP2 -> decode TP1, NIXL, the real
sglang-router) against a colocated TP1 reference (parity starts a TP2 control for the floor), a deliberately
broken candidate, a candidate whose prefill runs another checkpoint, `make demo`'s shape under gpu-like numerics
(a launched colocated reference topology), the soak on the CLI, and the HTML report in headless Chromium.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import pd as pd_support
from tests.support import servers
from tests.support.chromium import Chromium

pytestmark = pytest.mark.e2e

# Short enough for CPU, long enough to cross a page (16), the window (32) and several pages.
MAX_PROMPT_TOKENS = "49"


def _parity(*args: str, timeout: float = 240, cwd: Path | None = None) -> tuple[subprocess.CompletedProcess, dict]:
    """Run the real CLI; return the process and its --json document (written to stdout)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pdctl", "parity", "--json", "-", *args],
        check=False, capture_output=True, text=True, timeout=timeout, cwd=cwd,
    )
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout.strip(), proc.stderr
    return proc, json.loads(proc.stdout)


@pytest.fixture(scope="module")
def reference(ref_checkpoint):
    with servers.start_reference_server(ref_checkpoint, role="colocated", tp=1) as ref:
        yield ref


@pytest.fixture()
def pd(ref_checkpoint):  # one test uses it: torn down before the next PD deployment starts (2 CPU cores)
    # a small chunked-prefill size on prefill puts "chunk" and "past_chunk" prompts into a short suite
    with pd_support.start_pd(ref_checkpoint, prefill_tp=2, decode_tp=1, backend="nixl",
                             prefill_args=("--chunked-prefill-size", "40")) as deployment:
        yield deployment


def _write_state(run_dir: Path, pd) -> Path:
    """A run dir for the PD deployment (what `pdctl launch` writes), so --run-dir is exercised for real."""
    run_dir.mkdir(parents=True, exist_ok=True)
    state = {
        "topology": "parity-test", "run_dir": str(run_dir),
        "processes": [
            {"role": "prefill", "replica": 0, "node": "local", "pid": None, "pgid": None, "url": pd.prefill_url,
             "log": "", "executor": "local"},
            {"role": "decode", "replica": 0, "node": "local", "pid": None, "pgid": None, "url": pd.decode_url,
             "log": "", "executor": "local"},
        ],
        "router": {"url": pd.router_url, "pid": None, "pgid": None, "log": ""},
    }
    (run_dir / "state.json").write_text(json.dumps(state), encoding="utf-8")
    return run_dir


def test_pd_matches_colocated_cold_warm_concurrent(tmp_path, chromium: Chromium, reference, pd) -> None:
    run_dir = _write_state(tmp_path / "run", pd)
    report = tmp_path / "report.html"
    proc, doc = _parity(
        "--run-dir", str(run_dir), "--reference", reference.url, "--cold", "--warm", "--concurrent",
        "--max-prompt-tokens", MAX_PROMPT_TOKENS, "--copies", "2", "--report", str(report),
    )
    assert proc.returncode == 0, proc.stderr
    assert doc["ok"] is True and doc["tolerance"] == 0.05 and doc["max_new_tokens"] == 32
    # TP2 -> TP1 against TP1: a TP2 control was started for the floor (exact numerics: it is 0)
    assert doc["tp"]["candidate"] == [2, 1] and doc["tp"]["reference"] == [1, 1]
    assert [(c["tp"], c["source"]) for c in doc["tp"]["controls"]] == [(2, "launched")]
    assert all(doc["floor"][m]["level"] == 0.0 for m in ("cold", "warm", "concurrent"))
    assert {"floor", "statistic", "margin", "positions"} <= set(doc)
    lengths = {p["tokens"] for p in doc["prompts"]}
    # page (16) edges and multiples, just past the window (32), the chunk (40) and just past it
    assert {15, 16, 17, 32, 33, 40, 41, 49} <= lengths
    for mode in ("cold", "warm", "concurrent"):
        m = doc["modes"][mode]
        assert m["compared"] > 0 and m["passed"] == m["compared"], (mode, m["failures"])
        assert m["max_abs_delta"] <= 1e-3  # PD TP2->TP1 agrees with TP1 to float32 rounding
    warm = doc["modes"]["warm"]
    assert max(warm["cached_tokens"]) >= 48  # prefill served three whole pages of the 49-token prompt
    assert doc["modes"]["warm"]["control"]["passed"] == doc["modes"]["warm"]["control"]["compared"]
    # The HTML report opens in headless Chromium, and the page shows the plot (non-blank screenshot).
    dom = chromium.dump_dom(report)
    assert 'id="plot"' in dom and "data:image/png;base64," in dom, dom[-2000:]
    assert 'id="verdict">PASS<' in dom and "Floor (tp2 control)" in dom and 'id="positions"' in dom
    chromium.assert_not_blank(chromium.screenshot(report, tmp_path / "report.png"))


def test_broken_decode_layout_fails_cold_with_first_mismatch(ref_checkpoint, reference) -> None:
    broken_args = ("--kv-layout", "vectorized_5d", "--unsafe-skip-handshake-checks")
    with pd_support.start_pd(ref_checkpoint, prefill_tp=2, decode_tp=1, backend="nixl",
                             decode_args=broken_args) as broken:
        proc, doc = _parity(
            # only the router URL: parity finds prefill and decode through the router's GET /workers
            "--candidate", broken.router_url, "--reference", reference.url, "--cold", "--max-prompt-tokens", "40",
        )
    assert proc.returncode == 1, proc.stderr
    assert doc["ok"] is False
    assert doc["candidate_workers"] == {"prefill": [broken.prefill_url], "decode": [broken.decode_url]}
    failures = doc["modes"]["cold"]["failures"]
    assert failures, doc
    for failure in failures:
        assert isinstance(failure["first_mismatch"], int)
        # the first token is computed by prefill, which is intact: the corruption shows after the transfer
        assert failure["prefill_differs"] is False
    assert "first mismatch" in proc.stderr or "PARITY FAILED" in proc.stderr


def test_prefill_on_another_checkpoint_vs_launched_reference_topology(tmp_path, ref_checkpoint) -> None:
    """prefill_differs for a prefill on other weights, and it explains nothing: no cold comparison passed (with
    --warm alone none ran), so warm failures stay failures. The reference is a topology pdctl launches itself."""
    from pdctl.reference.checkpoint import init_checkpoint
    from tests.support.launch_samples import (
        local_cpu,  # configs/local-cpu.yaml with free ports and this checkpoint
    )

    other = init_checkpoint(tmp_path / "seed1", seed=1)
    topo = local_cpu(tmp_path, ref_checkpoint, name="parity-ref")
    # the candidate's prefill runs the seed-1 weights (the last --model-path wins), its decode the reference's
    with pd_support.start_pd(ref_checkpoint, prefill_tp=2, decode_tp=1, backend="nixl",
                             prefill_args=("--model-path", str(other))) as candidate:
        common = ("--candidate", candidate.router_url, "--decode-url", candidate.decode_url,
                  "--prefill-url", candidate.prefill_url, "--reference-topology", str(topo), "--launch-timeout",
                  "120", "--no-control", "--max-prompt-tokens", "20", "--max-new-tokens", "4")
        proc, doc = _parity(*common, "--cold", "--warm", cwd=tmp_path)
        warm_only, warm_doc = _parity(*common, "--warm", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    cold = doc["modes"]["cold"]["failures"]
    assert cold and all(f["prefill_differs"] and f["prefill_max_abs_delta"] > 0.05 for f in cold)
    assert all(f["first_mismatch"] == 0 for f in cold)
    warm = doc["modes"]["warm"]
    assert warm["failures"] and all(f["explained_by"] is None for f in warm["failures"])
    # --warm alone must not say PARITY OK for a prefill on the wrong weights (issue 12)
    assert warm_only.returncode == 1, warm_only.stderr
    assert warm_doc["ok"] is False and "PARITY FAILED" in warm_only.stderr
    failures = warm_doc["modes"]["warm"]["failures"]
    assert failures and all(f["prefill_differs"] and f["explained_by"] is None for f in failures)
    assert all("no cold comparison of this prompt passed" in f["unexplained_because"] for f in failures)
    # the launched reference is torn down, and the user's latest run is not the reference's
    import requests

    assert doc["reference"].startswith("http://127.0.0.1:")
    with pytest.raises(requests.RequestException):
        requests.get(doc["reference"] + "/health", timeout=2)
    assert not (tmp_path / ".pdctl" / "latest").exists()


def test_prompts_file_with_text_and_ids(tmp_path, reference) -> None:
    """--prompts: text prompts go as text (the server tokenizes), ids as ids; warm reuses the text's prefix."""
    prompts = tmp_path / "prompts.jsonl"
    text = "The quick brown fox jumps over the lazy dog; " * 2  # 90 bytes: several 16-token pages
    prompts.write_text(json.dumps({"text": text, "name": "fox"}) + "\n"
                       + json.dumps({"input_ids": list(range(65, 65 + 20))}) + "\n", encoding="utf-8")
    proc, doc = _parity("--candidate", reference.url, "--reference", reference.url, "--prompts", str(prompts),
                        "--warm", "--concurrent", "--copies", "2", "--soak", "2", "--max-new-tokens", "8")
    assert proc.returncode == 0, proc.stderr
    soak = doc["soak"]  # the reference against itself, twice more: nothing drifts
    assert soak["ok"] is True and [r["round"] for r in soak["rounds"]] == [1, 2] and soak["rounds"][1]["served_before"] == 4
    assert "soak: 2 rounds" in " ".join(proc.stderr.split())
    # live progress on stderr (not a terminal here: one line per prompt, with passes and failures so far)
    assert "parity warm: 1/2  pass 2 fail 0" in proc.stderr and "parity concurrent: 4/4  pass 4 fail 0" in proc.stderr
    assert [p["name"] for p in doc["prompts"]] == ["fox", "line2"]
    warm = doc["modes"]["warm"]
    assert warm["passed"] == warm["compared"] == 4  # two prompts, each resent and with a shared-prefix variant
    assert min(warm["cached_tokens"]) > 0
    assert doc["modes"]["concurrent"]["compared"] == 4


def test_demo_shape_gpu_like_pd_vs_launched_colocated_reference(tmp_path, ref_checkpoint, chromium: Chromium) -> None:
    """`make demo`'s parity step under GPU-like numerics: PD TP2 -> TP1 against a colocated TP1 topology that
    parity launches (--numerics gpu-like rewrites it) and a TP2 control it starts itself. The clean deployment
    passes — its cold answers differ from TP1's (TP rounding), by no more than the TP2 control's do."""
    from tests.support.launch_samples import local_cpu_reference

    topo = local_cpu_reference(tmp_path, ref_checkpoint, name="demo-ref")
    gpu_like = ("--numerics", "gpu-like")
    report = tmp_path / "demo.html"
    with pd_support.start_pd(ref_checkpoint, prefill_tp=2, decode_tp=1, backend="nixl", prefill_args=gpu_like,
                             decode_args=gpu_like) as candidate:
        proc, doc = _parity("--candidate", candidate.router_url, "--reference-topology", str(topo), "--numerics",
                            "gpu-like", "--cold", "--warm", "--max-prompt-tokens", "160", "--launch-timeout", "120",
                            "--report", str(report), cwd=tmp_path, timeout=900)
    assert proc.returncode == 0, (proc.stderr[-4000:], {m: d["failures"] for m, d in doc["modes"].items()})
    assert doc["numerics"]["candidate"] == doc["numerics"]["reference"] == "gpu-like"
    assert [(c["tp"], c["source"], c["numerics"]) for c in doc["tp"]["controls"]] == [(2, "launched", "gpu-like")]
    cold = doc["modes"]["cold"]
    assert cold["floor"]["level"] > 0 and cold["failures"]  # TP rounding is real ...
    assert all(f["explained_by"] == "floor" for f in cold["failures"])  # ... and measured, not blamed
    assert doc["margin"] > 1 and max(p["tokens"] for p in doc["prompts"]) >= 145  # past four windows
    dom = chromium.dump_dom(report)
    assert 'id="verdict">PASS<' in dom and "explained (floor)" in dom and 'id="margin"' in dom
