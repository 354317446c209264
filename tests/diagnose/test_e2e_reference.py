"""`pdctl diagnose` on real failures of the reference engine behind the real sglang-router (the local CPU
topology: prefill TP2 -> decode TP1 over NIXL): faults injected into a running deployment (a prefill stopped
during a transfer, a prefill killed with SIGKILL while a request is in flight, a KV pool too small for the
prompt, a port taken when a process restarts) and launches that fail (a bad model path, an invalid flag value).
Each case asserts the diagnosis: the root cause's signature, its process, and what follows it; and that a
failing command (launch, restart) ends its message and its JSON with it."""

from __future__ import annotations

import json
import os
import signal
import socket
import threading
from pathlib import Path

import pytest
import requests

from pdctl.executors.local import proc_stat
from tests.support.launch_e2e import pdctl, record, resume_and_down
from tests.support.launch_samples import local_cpu
from tests.support.net import wait_for
from tests.support.orphans import assert_no_orphans

pytestmark = pytest.mark.e2e

TIMEOUT_S = 5  # the reference engine's --transfer-timeout here: a stopped prefill is given up on after it
POOL_TOKENS = 512  # --max-total-tokens: a prompt of more tokens than this cannot get its KV pages


@pytest.fixture(scope="module")
def dep(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("diagnose")
    topo = local_cpu(tmp, ref_checkpoint, name="diagnose",
                     server={"max_total_tokens": POOL_TOKENS,
                             "args": {"numerics": "gpu-like", "transfer-timeout": TIMEOUT_S}})
    run_dir = tmp / "run"
    done = pdctl("launch", str(topo), "--detach", "--skip-preflight", "--run-dir", str(run_dir), "--timeout", "180",
                 cwd=tmp, timeout=400)
    try:
        assert done.returncode == 0, done.stderr
        yield {"tmp": tmp, "run_dir": run_dir}
    finally:
        resume_and_down(run_dir, tmp)
        assert_no_orphans(run_dir)


def log_of(dep: dict, name: str) -> str:
    try:
        return Path(record(dep, name)["log"]).read_text(errors="replace")
    except OSError:
        return ""


def generate(dep: dict, text: str, max_new_tokens: int = 4) -> requests.Response | Exception:
    url = json.loads((dep["run_dir"] / "state.json").read_text())["router"]["url"]
    body = {"text": text, "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}}
    try:
        return requests.post(url + "/generate", json=body, timeout=120)
    except requests.RequestException as exc:
        return exc


def in_background(dep: dict, text: str) -> threading.Thread:
    t = threading.Thread(target=generate, args=(dep, text), daemon=True)
    t.start()
    return t


def diagnose(dep: dict) -> tuple[int, dict]:
    done = pdctl("diagnose", "--run-dir", str(dep["run_dir"]), "--json", "-", cwd=dep["tmp"], timeout=120)
    return done.returncode, json.loads(done.stdout)


def serves(dep: dict) -> bool:
    answer = generate(dep, "2 + 2 =")
    return isinstance(answer, requests.Response) and answer.status_code == 200


def by_process(doc: dict) -> dict[str, dict]:
    return {f["process"]: f for f in doc["findings"]}


def test_1_a_healthy_deployment_has_no_failure(dep: dict) -> None:
    assert serves(dep)
    code, doc = diagnose(dep)
    assert code == 0 and doc["findings"] == [] and doc["checked"] == 3


def test_2_a_prefill_stopped_during_a_transfer_is_the_root_cause_of_decodes_timeout(dep: dict) -> None:
    prefill = record(dep, "prefill-0")
    os.killpg(int(prefill["pgid"]), signal.SIGSTOP)
    try:
        sent = in_background(dep, "The capital of France is")
        wait_for(lambda: " failed: " in log_of(dep, "decode-0"), timeout=120,
                 what="decode to give up on the stopped prefill", detail=lambda: log_of(dep, "decode-0")[-2000:])
        code, doc = diagnose(dep)
    finally:
        os.killpg(int(prefill["pgid"]), signal.SIGCONT)
    assert code == 1
    root = doc["findings"][0]
    assert (root["process"], root["signature"], root["component"]) == ("prefill-0", "stopped", "process")
    assert "kill -CONT" in root["fix"]
    decode = by_process(doc)["decode-0"]
    # the bootstrap server of a stopped prefill does not answer (ref-peer-gone); had it answered before the stop,
    # decode's room clock would have run out (ref-transfer-timeout): both are decode giving up on it
    assert decode["signature"] in ("ref-peer-gone", "ref-transfer-timeout") and decode["follows"] == "prefill-0"
    assert decode["explanation"] == f"decode-0's {decode['signature']} follows prefill-0's stopped"
    sent.join(timeout=150)
    wait_for(lambda: serves(dep), timeout=120, what="the deployment to serve again after SIGCONT")


def test_3_a_prefill_killed_with_sigkill_mid_transfer_is_the_root_cause(dep: dict) -> None:
    prefill = record(dep, "prefill-0")
    os.killpg(int(prefill["pgid"]), signal.SIGSTOP)  # hold it mid-request, then kill it there
    asked = log_of(dep, "decode-0").count("asking prefill")
    sent = in_background(dep, "Once upon a time")
    wait_for(lambda: log_of(dep, "decode-0").count("asking prefill") > asked, timeout=60,
             what="decode to ask the prefill for the new request's KV")
    os.killpg(int(prefill["pgid"]), signal.SIGKILL)
    wait_for(lambda: (proc_stat(int(prefill["pid"])) or ("Z",))[0] == "Z", timeout=60, what="the prefill to die")
    code, doc = diagnose(dep)
    assert code == 1
    assert (doc["findings"][0]["process"], doc["findings"][0]["signature"]) == ("prefill-0", "exited-silently"), doc
    assert "OOM killer" in doc["findings"][0]["cause"] and "pdctl restart" in doc["findings"][0]["fix"]
    assert by_process(doc)["decode-0"]["follows"] == "prefill-0"
    sent.join(timeout=150)
    done = pdctl("restart", "prefill", "--run-dir", str(dep["run_dir"]), cwd=dep["tmp"], timeout=400)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: serves(dep), timeout=120, what="the deployment to serve after the restart")


def test_4_a_port_taken_when_decode_restarts_ends_restarts_failure_with_the_diagnosis(dep: dict) -> None:
    decode = record(dep, "decode-0")
    port = int(decode["url"].rsplit(":", 1)[1])
    os.killpg(int(decode["pgid"]), signal.SIGKILL)
    wait_for(lambda: pdctl("status", "--run-dir", str(dep["run_dir"]), cwd=dep["tmp"]).returncode != 0, timeout=60,
             what="decode to be seen dead")
    with socket.socket() as squatter:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        wait_for(lambda: _bind(squatter, port), timeout=60, what=f"port {port} to be free to take")
        squatter.listen(1)
        done = pdctl("restart", "decode", "--run-dir", str(dep["run_dir"]), cwd=dep["tmp"], timeout=400)
        code, doc = diagnose(dep)  # while the port is still taken: the restarted decode's log says why it died
    assert done.returncode == 1, done.stderr
    assert "diagnosis (root cause first)" in done.stderr and "decode-0: ref-bind" in done.stderr, done.stderr
    assert code == 1 and ("decode-0", "ref-bind") in {(f["process"], f["signature"]) for f in doc["findings"]}
    done = pdctl("restart", "decode", "--run-dir", str(dep["run_dir"]), cwd=dep["tmp"], timeout=400)
    assert done.returncode == 0, done.stderr
    wait_for(lambda: serves(dep), timeout=120, what="the deployment to serve after the restart")


def test_5_a_prompt_larger_than_the_kv_pool_is_diagnosed_as_the_pool(dep: dict) -> None:
    # ~1500 tokens: within the model's context (4096), three times what the pool holds
    answer = generate(dep, "one two three four five six seven eight nine ten " * 30)
    assert isinstance(answer, requests.Response) and answer.status_code >= 400
    assert "KV cache out of memory" in answer.text, answer.text
    code, doc = diagnose(dep)
    assert code == 1, doc
    pool = [f for f in doc["findings"] if f["signature"] == "ref-kv-oom"]
    assert pool and "--max-total-tokens" in pool[0]["fix"], doc
    assert pool[0]["follows"] is None  # a root cause of its own


def _bind(sock: socket.socket, port: int) -> bool:
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        return False
    return True


@pytest.mark.parametrize(("change", "signature"), [
    ({"model": {"path": "/nonexistent/reference-tiny", "preset": "reference-tiny"}}, "ref-bad-model-path"),
    ({"decode": {"args": {"transfer-timeout": "soon"}}}, "ref-bad-flag"),
])
def test_a_launch_that_fails_ends_with_the_diagnosis(tmp_path: Path, ref_checkpoint: Path, change: dict,
                                                     signature: str) -> None:
    topo = local_cpu(tmp_path, ref_checkpoint, name="diagnose-launch", **change)
    run_dir = tmp_path / "run"
    done = pdctl("launch", str(topo), "--detach", "--skip-preflight", "--skip-compat", "--run-dir", str(run_dir),
                 "--timeout", "120", "--json", "-", cwd=tmp_path, timeout=300)
    try:
        assert done.returncode == 1, done.stdout + done.stderr
        assert "diagnosis (root cause first)" in done.stderr and signature in done.stderr
        findings = json.loads(done.stdout)["diagnosis"]["findings"]
        assert findings[0]["signature"] == signature, findings
        again = pdctl("diagnose", "--run-dir", str(run_dir), "--json", "-", cwd=tmp_path)
        assert again.returncode == 1  # after the launch, from the logs
        assert json.loads(again.stdout)["findings"][0]["signature"] == signature
    finally:
        assert_no_orphans(run_dir)
