"""Field incidents after launch, for real: `pdctl launch` of the local CPU topology (reference prefill TP2 ->
decode TP1 over NIXL, the real sglang-router), then

* `pdctl status` reads each server's real max_total_num_tokens (/server_info, as SGLang serves it) and holds
  it against check-compat's estimate: it agrees, and says "differs" when the run's topology no longer
  describes the servers;
* `pdctl status --watch` raises the stuck-transfer alarm when the decode holds a request whose prefill is
  frozen (SIGSTOP), and none while requests flow.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests
import yaml

from tests.support.launch_e2e import detached_run, pdctl
from tests.support.launch_samples import local_cpu
from tests.support.net import wait_for

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("e2e-incidents")
    # decode waits up to 10 min for a room's KV: a frozen prefill is a stuck transfer, not a failed one
    topo = local_cpu(tmp, ref_checkpoint, name="e2e-incidents", decode={"args": {"transfer-timeout": 600}})
    with detached_run(tmp, topo) as dep:
        yield dep


def status(dep: dict) -> dict[str, dict]:
    done = pdctl("status", "--run-dir", str(dep["run_dir"]), "--json", "-", cwd=dep["tmp"])
    assert done.returncode == 0, done.stderr
    return {p["name"]: p for p in json.loads(done.stdout)["processes"]}


def test_status_compares_the_real_kv_pool_with_the_estimate(deployment: dict) -> None:
    got = status(deployment)
    for name in ("prefill-0", "decode-0"):
        kv = got[name]["kv_capacity"]
        assert kv["max_total_num_tokens"] == 8192 and kv["estimate"] == 8192 and kv["verdict"] == "agrees", kv
    copy = deployment["run_dir"] / "topology.yaml"
    original = copy.read_text()
    doc = yaml.safe_load(original)
    doc["decode"]["max_total_tokens"] = 4096  # the servers were not launched from this any more
    copy.write_text(yaml.safe_dump(doc))
    try:
        got = status(deployment)
    finally:
        copy.write_text(original)
    assert got["decode-0"]["kv_capacity"]["verdict"] == "differs" and got["decode-0"]["kv_capacity"]["ratio"] == 2.0
    assert got["prefill-0"]["kv_capacity"]["verdict"] == "agrees"


def _lines(stream, out: queue.Queue) -> None:
    for line in stream:
        out.put(line)


def watch(dep: dict, stall_after: float) -> tuple[subprocess.Popen, queue.Queue]:
    proc = subprocess.Popen([sys.executable, "-m", "pdctl", "status", "--watch", "--interval", "0.5", "--stall-after",
                             str(stall_after), "--run-dir", str(dep["run_dir"]), "--json", "-"],
                            cwd=dep["tmp"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_lines, args=(proc.stdout, lines), daemon=True).start()
    return proc, lines


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def send(router_url: str, i: int) -> None:
    body = {"text": f"request {i}: the quick brown fox", "sampling_params": {"max_new_tokens": 3, "temperature": 0}}
    assert requests.post(router_url + "/generate", json=body, timeout=120).status_code == 200


def test_watch_stays_quiet_while_transfers_flow(deployment: dict) -> None:
    proc, lines = watch(deployment, stall_after=10)
    docs = []
    try:
        docs.append(json.loads(lines.get(timeout=60)))
        for i in range(6):
            send(deployment["state"]["router"]["url"], i)
        deadline = time.monotonic() + 60
        while len(docs) < 6 and time.monotonic() < deadline:
            docs.append(json.loads(lines.get(timeout=30)))
    finally:
        stop(proc)
    assert len(docs) >= 6 and all(d["alarms"] == [] for d in docs), [d["alarms"] for d in docs]


def test_watch_raises_the_stuck_transfer_alarm_for_a_frozen_prefill(deployment: dict) -> None:
    """The router's dual dispatch by hand: decode gets its half of room R and waits for R's KV; the prefill is
    frozen (SIGSTOP) before it gets its half, so nothing moves; the watch must say so, naming decode-0."""
    state = deployment["state"]
    urls = {p["name"]: p["url"] for p in state["processes"]}
    prefill = next(p for p in json.loads((deployment["run_dir"] / "state.json").read_text())["processes"]
                   if p["name"] == "prefill-0")
    info = requests.get(urls["prefill-0"] + "/server_info", timeout=30).json()
    room = {"bootstrap_host": "127.0.0.1", "bootstrap_port": info["disaggregation_bootstrap_port"],
            "bootstrap_room": 24024}
    body = {"text": "a stuck room", "sampling_params": {"max_new_tokens": 2, "temperature": 0}} | room
    results: dict = {}

    def post(name: str) -> threading.Thread:
        def run() -> None:
            results[name] = requests.post(urls[f"{name}-0"] + "/generate", json=body, timeout=300)

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        return thread

    def transferring() -> int:
        return requests.get(urls["decode-0"] + "/server_info", timeout=30).json()["internal_states"][0][
            "num_transferring_reqs"]

    threads = [post("decode")]
    wait_for(lambda: transferring() == 1, timeout=60, what="decode to wait for room 24024's KV")
    os.killpg(prefill["pgid"], signal.SIGSTOP)
    alarms: list = []
    try:
        proc, lines = watch(deployment, stall_after=3)
        try:
            deadline = time.monotonic() + 120
            while not alarms and time.monotonic() < deadline:
                doc = json.loads(lines.get(timeout=60))
                alarms = [a for a in doc["alarms"] if a["process"] == "decode-0"]
        finally:
            stop(proc)
    finally:
        os.killpg(prefill["pgid"], signal.SIGCONT)
    threads.append(post("prefill"))  # the prefill's half: the room completes, nothing is left behind
    for thread in threads:
        thread.join(300)
    assert alarms and alarms[0]["kind"] == "stuck-transfers" and "none completed" in alarms[0]["message"], alarms
    assert alarms[0]["span_s"] >= 3
    assert results["decode"].status_code == 200 and results["prefill"].status_code == 200
