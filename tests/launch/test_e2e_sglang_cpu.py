"""End to end on SGLang's REAL server: `pdctl launch configs/local-cpu-sglang.yaml` (SGLang 0.5.23's own
launch_server as prefill TP1 -> decode TP1 on CPU, KV over NIXL, the real sglang-router), then a routed request,
status, logs, eval gsm8k and down, on ONE shared deployment (module-scoped: a PD pair costs ~4 GiB and 30-80 s
to start, and its schedulers busy-poll). Every test fails if the servers were pdctl's reference engine: their
children are SGLang's scheduler/detokenizer processes, /server_info is SGLang's and /metrics carries its series."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from pdctl.sglang_cpu import SERVE_MODULE
from pdctl.sglang_cpu.sidevenv import init_model
from tests.support.launch_e2e import generate, pdctl, wait_state
from tests.support.net import free_port
from tests.support.orphans import assert_no_orphans, group_pids, started_records
from tests.support.paths import DATA, REPO

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, sglang_python: str) -> Iterator[dict]:
    """The launched deployment (state.json, run dir, the launch's stderr); always brought down, and checked to
    leave no process behind."""
    tmp = tmp_path_factory.mktemp("sglang-cpu")
    env = {**os.environ, "PDCTL_SGLANG_PYTHON": sglang_python}
    model = init_model(str(tmp / "tiny-llama"), "llama", 0)
    doc = yaml.safe_load((REPO / "configs" / "local-cpu-sglang.yaml").read_text())
    doc["model"]["path"] = model["path"]
    # the shipped config's ports sit in the kernel's ephemeral range: a test takes reserved free ports instead
    doc["transfer"]["bootstrap_port"] = free_port()
    for section in ("prefill", "decode", "router"):
        doc[section]["port"] = free_port()
    doc["router"]["metrics_port"] = free_port()
    topo = tmp / "topo.yaml"
    topo.write_text(yaml.safe_dump(doc))
    run_dir = tmp / ".pdctl" / "runs" / doc["name"]
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--timeout", "400"],
                          cwd=tmp, capture_output=True, text=True, timeout=900, check=False, env=env)
    try:
        assert done.returncode == 0, done.stderr[-4000:]
        state = wait_state(run_dir, "running", 60)
        yield {"state": state, "run_dir": run_dir, "cwd": tmp, "env": env, "launch": done.stderr}
    finally:
        down = pdctl("down", "--run-dir", str(run_dir), cwd=tmp, timeout=120)
        assert down.returncode == 0, down.stderr
        assert_no_orphans(run_dir)


def _children_titles(pid: int) -> list[str]:
    out = subprocess.run(["ps", "-o", "cmd=", "--ppid", str(pid)], capture_output=True, text=True, check=False)
    return out.stdout.split("\n")


def test_the_servers_are_sglangs_own(deployment: dict) -> None:
    for proc in deployment["state"]["processes"]:
        cmd = Path(f"/proc/{proc['pid']}/cmdline").read_bytes().split(b"\0")
        assert cmd[1:3] == [b"-m", SERVE_MODULE.encode()], cmd[:3]
        titles = " ".join(_children_titles(int(proc["pid"])))
        assert "sglang::scheduler" in titles and "sglang::detokenizer" in titles, titles
        info = requests.get(proc["url"] + "/server_info", timeout=30).json()
        assert info["version"] == "0.5.23" and info["disaggregation_mode"] == proc["role"], info.get("version")
        assert info["device"] == "cpu" and info["attention_backend"] == "torch_native"
        metrics = requests.get(proc["url"] + "/metrics", timeout=30).text
        series = {line.split("{")[0] for line in metrics.splitlines() if line.startswith("sglang:")}
        assert len(series) >= 20 and "sglang:routing_keys_active" in metrics, sorted(series)[:40]
    # launch's preflight moved a request's KV through SGLang's own NIXL stack between the node's servers
    assert "sglang 0.5.23" in " ".join(deployment["launch"].split())


def test_routed_greedy_tokens_are_stable_and_logs_show_the_adaptations(deployment: dict) -> None:
    url = deployment["state"]["router"]["url"]
    first = generate(url, "Natalia sold clips to", max_new_tokens=8)
    again = generate(url, "Natalia sold clips to", max_new_tokens=8)
    assert len(first["output_ids"]) == 8 and first["output_ids"] == again["output_ids"]
    logs = pdctl("logs", "prefill-0", "--run-dir", str(deployment["run_dir"]), cwd=deployment["cwd"])
    assert logs.returncode == 0, logs.stderr
    text = Path(deployment["state"]["processes"][0]["log"]).read_text(errors="replace")
    assert "pdctl CPU adaptations applied: sgl-kernel-standin" in text and "nixl-host-memory" in text


def test_status_reads_sglangs_metrics(deployment: dict) -> None:
    done = pdctl("status", "--run-dir", str(deployment["run_dir"]), "--json", "-", cwd=deployment["cwd"],
                 env=deployment["env"])
    assert done.returncode == 0, done.stderr[-3000:]
    doc = json.loads(done.stdout)
    text = json.dumps(doc)
    assert "healthy" in text and "sglang" in text


def test_eval_gsm8k_through_real_sglang(deployment: dict) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "pdctl", "eval", "gsm8k", "--run-dir", str(deployment["run_dir"]), "--data-file",
         str(DATA / "gsm8k_test_50.jsonl"), "--num-questions", "3", "--num-shots", "1", "--max-new-tokens", "8",
         "--parallel", "2", "--deadline", "300", "--json", "-"],
        cwd=deployment["cwd"], capture_output=True, text=True, timeout=600, check=False, env=deployment["env"])
    assert done.returncode in (0, 1), done.stderr[-3000:]  # a random-weight model scores 0: the floor may fail
    summary = json.loads(done.stdout)
    assert summary["asked"] == 3 and summary["errors"] == 0, summary


def test_every_sglang_process_is_in_the_recorded_groups(deployment: dict) -> None:
    # down (the fixture) then finds nothing left; here: SGLang's forks live in the groups pdctl recorded
    pids = group_pids(started_records(deployment["run_dir"]))
    titles = [Path(f"/proc/{p}/cmdline").read_bytes() for p in pids if Path(f"/proc/{p}").exists()]
    assert sum(b"sglang::scheduler" in t for t in titles) == 2, titles
