"""End to end: `pdctl launch` of the local CPU topology with `transfer.stack: sglang` — the reference engine in
SGLang's interpreter, its PD roles handing KV off through SGLang 0.5.23's own managers, senders, receivers and
bootstrap server, behind the real sglang-router. Launch's preflight runs its transfer test on SGLang's stack
too; a request through the router is answered exactly as on pdctl's own stack; down leaves nothing behind."""

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

pytestmark = [pytest.mark.e2e]


def _launch(tmp: Path, topo: Path, name: str) -> tuple[dict, Path]:
    run_dir = tmp / ".pdctl" / "runs" / name
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--timeout", "400",
                           "--json", "-"], cwd=tmp, capture_output=True, text=True, timeout=900, check=False)
    assert done.returncode == 0, done.stderr[-4000:]
    return wait_state(run_dir, "running", 60), run_dir


def test_launch_on_sglang_stack_answers_like_pdctls_stack(tmp_path: Path, ref_checkpoint: Path,
                                                          sglang_stack_python: str, monkeypatch) -> None:
    monkeypatch.setenv("PDCTL_SGLANG_PYTHON", sglang_stack_python)
    answers = {}
    for stack in ("sglang", "pdctl"):
        name = f"stack-{stack}"
        topo = local_cpu(tmp_path, ref_checkpoint, name=name, transfer={"stack": stack})
        state, run_dir = _launch(tmp_path, topo, name)
        try:
            answers[stack] = generate(state["router"]["url"], max_new_tokens=6)
            logs = {r.get("role", "router"): Path(r["log"]).read_text(errors="replace") for r in started_records(run_dir)}
            plan = json.loads((run_dir / "plan.json").read_text())
        finally:
            down = pdctl("down", "--run-dir", str(run_dir), cwd=tmp_path, timeout=120)
            assert down.returncode == 0, down.stderr
        assert_no_orphans(run_dir)
        if stack == "sglang":
            for proc in plan["processes"]:  # the engine ran in SGLang's interpreter, on SGLang's stack
                assert proc["argv"][0] == os.path.abspath(sglang_stack_python), proc["argv"][:3]
                assert "--transfer-stack" in proc["argv"]
            assert "SGLang 0.5.23 stack" in logs["prefill"] and "SGLang 0.5.23 stack" in logs["decode"]
    assert answers["sglang"]["output_ids"] == answers["pdctl"]["output_ids"]
    assert answers["sglang"]["meta_info"]["completion_tokens"] == 6
