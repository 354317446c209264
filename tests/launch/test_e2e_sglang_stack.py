"""End to end: `pdctl launch` of the local CPU topology with `transfer.stack: sglang` — the reference engine in
SGLang's interpreter, its PD roles handing KV off through SGLang 0.5.23's own managers, senders, receivers and
bootstrap server, behind the real sglang-router. Launch's preflight runs its transfer test on SGLang's stack
too (and says so); a request, `eval gsm8k` and `bench serve` go through the router; down leaves nothing
behind. (That the answers equal
pdctl's own stack's is tests/parity/test_parity_sglang_stack.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.launch_e2e import generate, pdctl, wait_state
from tests.support.launch_samples import local_cpu
from tests.support.orphans import assert_no_orphans, started_records
from tests.support.paths import DATA

pytestmark = [pytest.mark.e2e]


def test_launch_on_sglang_stack(tmp_path: Path, ref_checkpoint: Path, sglang_stack_python: str) -> None:
    topo = local_cpu(tmp_path, ref_checkpoint, name="stack-sglang", transfer={"stack": "sglang"})
    run_dir = tmp_path / ".pdctl" / "runs" / "stack-sglang"
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--timeout", "400"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False,
                          env={**os.environ, "PDCTL_SGLANG_PYTHON": sglang_stack_python})
    try:
        assert done.returncode == 0, done.stderr[-4000:]
        state = wait_state(run_dir, "running", 60)
        out = generate(state["router"]["url"], max_new_tokens=6)
        assert out["meta_info"]["completion_tokens"] == 6 and len(out["output_ids"]) == 6
        env = {**os.environ, "PDCTL_SGLANG_PYTHON": sglang_stack_python}
        evaluated = subprocess.run(
            [sys.executable, "-m", "pdctl", "eval", "gsm8k", "--run-dir", str(run_dir), "--data-file",
             str(DATA / "gsm8k_test_50.jsonl"), "--num-questions", "5", "--num-shots", "1", "--max-new-tokens", "16",
             "--parallel", "2", "--deadline", "600", "--json", "-"],
            cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False, env=env)
        assert evaluated.returncode == 0, evaluated.stderr[-3000:]
        summary = json.loads(evaluated.stdout)
        assert summary["asked"] == 5 and summary["errors"] == 0, summary
        benched = subprocess.run(
            [sys.executable, "-m", "pdctl", "bench", "serve", "--run-dir", str(run_dir), "--tool-python",
             sglang_stack_python, "--concurrency", "2", "--isl", "16", "--osl", "4", "--num-prompts", "4",
             "--warmup", "1", "--work-dir", str(tmp_path / "bench"), "--deadline", "600", "--json", "-"],
            cwd=tmp_path, capture_output=True, text=True, timeout=900, check=False, env=env)
        assert benched.returncode == 0, benched.stderr[-3000:]
        point = json.loads(benched.stdout)["points"][0]
        assert (point["requests"], point["completed"], point["errors"]) == (4, 4, 0), point
        logs = {r.get("role", "router"): Path(r["log"]).read_text(errors="replace") for r in started_records(run_dir)}
        plan = json.loads((run_dir / "plan.json").read_text())
    finally:
        down = pdctl("down", "--run-dir", str(run_dir), cwd=tmp_path, timeout=120)
    assert down.returncode == 0, down.stderr
    assert_no_orphans(run_dir)
    # launch's preflight moved its test request through SGLang's stack, and said so
    assert "(sglang 0.5.23 (DRAM))" in " ".join(done.stderr.split()), done.stderr[-3000:]
    for proc in plan["processes"]:  # the engine ran in SGLang's interpreter, on SGLang's stack
        assert proc["argv"][0] == os.path.abspath(sglang_stack_python), proc["argv"][:3]
        assert proc["argv"][proc["argv"].index("--transfer-stack") + 1] == "sglang"
    assert "SGLang 0.5.23 stack" in logs["prefill"] and "SGLang 0.5.23 stack" in logs["decode"]
