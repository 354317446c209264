"""End to end on SGLang's REAL server with a tiny gpt-oss (`pdctl sglang-cpu init-model --shape gpt-oss`:
sliding-window + full layers, SGLang's hybrid SWA KV pool), prefill TP1 -> decode TP1 over NIXL through
`pdctl launch`, once: KV layout and transfer are SGLang's, but on CPU the attention sinks are ignored
(adaptation gpt-oss-sinks-ignored), so every output — launch, status, eval, parity, their JSON — must say the
numerics are not gpt-oss's. One test, one PD pair (the Llama module's pair is down by then: never two at once)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pdctl.sglang_cpu import NUMERICS_NOTE
from pdctl.sglang_cpu.sidevenv import init_model
from tests.support.launch_e2e import generate, pdctl
from tests.support.net import free_port
from tests.support.orphans import assert_no_orphans
from tests.support.paths import DATA, REPO

pytestmark = [pytest.mark.e2e]


def _flat(done: subprocess.CompletedProcess) -> str:
    return " ".join((done.stdout + done.stderr).split())


def test_a_gpt_oss_pd_pair_serves_on_the_hybrid_swa_pool_and_every_output_says_its_numerics_are_not_gpt_oss(
    tmp_path: Path, sglang_python: str
) -> None:
    env = {**os.environ, "PDCTL_SGLANG_PYTHON": sglang_python}
    model = init_model(str(tmp_path / "tiny-gpt-oss"), "gpt-oss", 0)
    doc = yaml.safe_load((REPO / "configs" / "local-cpu-sglang.yaml").read_text())
    doc["name"] = "cpu-gpt-oss"
    doc["model"] = {"path": model["path"]}
    doc["transfer"]["bootstrap_port"] = free_port()
    for section in ("prefill", "decode", "router"):
        doc[section]["port"] = free_port()
    doc["router"]["metrics_port"] = free_port()
    topo = tmp_path / "topo.yaml"
    topo.write_text(yaml.safe_dump(doc))
    run_dir = tmp_path / "run"

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pdctl", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=900, check=False, env=env)

    launched = run("launch", str(topo), "--detach", "--skip-preflight", "--run-dir", str(run_dir), "--timeout", "600")
    try:
        assert launched.returncode == 0, launched.stderr[-4000:]
        state = json.loads((run_dir / "state.json").read_text())
        assert NUMERICS_NOTE in _flat(launched)
        for proc in state["processes"]:  # SGLang's hybrid SWA pool, with the sinks adaptation applied
            log = Path(proc["log"]).read_text(errors="replace")
            assert "Use sliding window memory pool" in log and "gpt-oss-sinks-ignored" in log, proc["name"]
        router = state["router"]["url"]
        assert len(generate(router, max_new_tokens=4)["output_ids"]) == 4  # KV of both pools crossed the link

        status = run("status", "--run-dir", str(run_dir), "--json", "-")
        assert status.returncode == 0, status.stderr[-3000:]
        assert json.loads(status.stdout)["numerics_notes"] == [NUMERICS_NOTE]
        for row in json.loads(status.stdout)["processes"]:  # both pools SGLang reports, each as pdctl estimates
            kv = row["kv_capacity"]
            assert kv["verdict"] == "agrees" and kv["max_total_num_tokens"] == kv["estimate"], kv
            assert kv["swa_max_total_num_tokens"] == kv["swa_estimate"] and 0 < kv["swa_estimate"] < kv["estimate"]
        assert NUMERICS_NOTE in _flat(status)

        evaluated = run("eval", "gsm8k", "--run-dir", str(run_dir), "--data-file", str(DATA / "gsm8k_test_50.jsonl"),
                        "--num-questions", "2", "--num-shots", "1", "--max-new-tokens", "4", "--parallel", "2",
                        "--deadline", "600", "--json", "-")
        assert evaluated.returncode in (0, 1), evaluated.stderr[-3000:]  # random weights: the floor may fail
        summary = json.loads(evaluated.stdout)
        assert summary["errors"] == 0 and summary["numerics_notes"] == [NUMERICS_NOTE], summary
        assert NUMERICS_NOTE in _flat(evaluated)

        prompts = tmp_path / "prompts.jsonl"
        prompts.write_text(json.dumps({"text": "Natalia sold clips to forty-eight of her friends"}) + "\n")
        parity = run("parity", "--run-dir", str(run_dir), "--reference", router, "--cold", "--prompts", str(prompts),
                     "--max-new-tokens", "4", "--no-control", "--deadline", "600", "--json", "-")
        assert parity.returncode == 0, _flat(parity)[-3000:]  # the deployment against itself: the note is the point
        assert json.loads(parity.stdout)["numerics_notes"] == [NUMERICS_NOTE]
        assert NUMERICS_NOTE in _flat(parity)
    finally:
        down = pdctl("down", "--run-dir", str(run_dir), cwd=tmp_path, timeout=180)
    assert down.returncode == 0, down.stderr
    assert_no_orphans(run_dir)
