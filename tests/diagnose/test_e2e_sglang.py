"""`pdctl diagnose` on real failures of SGLang 0.5.23's own server (the side venv, on this machine's CPUs):

- `sglang.launch_server` run directly: a misspelled flag, a model path that does not exist (the server's own
  output is the log; its exit is pdctl's status line);
- `pdctl launch` of SGLang's real servers (configs/local-cpu-sglang.yaml's shape) that fail at start-up: an
  invalid flag value SGLang's parser refuses, and a port SGLang binds (torch.distributed's store on
  `--nccl-port`) taken by another process: pdctl's own port check knows only the HTTP and bootstrap ports;
- SGLang's NIXL host-memory guard on a running deployment: prefill TP2 -> decode TP1 over NIXL on a CPU node
  (launched with `--skip-compat`: check-compat refuses it, rule nixl-hetero-tp-host-memory) refuses at the first
  transfer, and the diagnosis names it as the root cause with its fix.

Real servers cost 17-45 s each to start here: the launches that fail share one tiny model and fail before any
model is loaded (both roles carry the fault); the guard has one deployment (module-scoped)."""

from __future__ import annotations

import json
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
import yaml

from pdctl.diagnose.explain import ProcessLog, explain
from pdctl.diagnose.kb_platform import EXIT_LINE
from pdctl.sglang.messages import NIXL_HETERO_TP_HOST
from pdctl.sglang_cpu.sidevenv import init_model
from tests.support.launch_e2e import pdctl, record, resume_and_down
from tests.support.net import free_port, wait_for
from tests.support.orphans import assert_no_orphans
from tests.support.paths import REPO

# a real server's start-up takes 17-45 s idle and minutes on a loaded machine: a launch in a fixture may take longer
# than the suite's default 300 s per phase
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

DISAGG_TIMEOUT_S = 15  # SGLang's bootstrap/waiting timeouts here (pdctl's CPU render: 60 s; SGLang's: 300 s)


@pytest.mark.parametrize(("args", "signature"), [
    (["--model-path", "/nonexistent/model", "--mem-fracton-static", "0.5"], "sglang-bad-flag"),
    (["--model-path", "/nonexistent/model", "--device", "cpu", "--host", "127.0.0.1", "--port", "0"],
     "sglang-bad-model-path"),
])
def test_a_real_sglang_server_failure_is_diagnosed(tmp_path: Path, sglang_python: str, args: list[str],
                                                  signature: str) -> None:
    log = tmp_path / "prefill-0.log"
    with log.open("w") as out:
        done = subprocess.run([sglang_python, "-m", "sglang.launch_server", *args], stdout=out,
                              stderr=subprocess.STDOUT, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode != 0
    found = explain([ProcessLog("prefill-0", "prefill", 0, "local", log.read_text().splitlines(),
                                [EXIT_LINE.format(code=done.returncode, signal="")], failed=True)])
    assert found.failed and found.root is not None
    assert found.root.what == signature, (found.summary(), log.read_text()[-2000:])
    assert found.root.signature.fix and "no known cause" not in found.summary()


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory, sglang_python: str) -> str:
    """A tiny Llama (random weights, offline tokenizer) every launch of the module serves."""
    return init_model(str(tmp_path_factory.mktemp("sglang-model") / "tiny-llama"), "llama", 0)["path"]


def topology(tmp: Path, model: str, **sections: dict) -> Path:
    """configs/local-cpu-sglang.yaml on MODEL with reserved free ports (the shipped ones sit in the kernel's
    ephemeral range), SECTIONS' keys merged in."""
    doc = yaml.safe_load((REPO / "configs" / "local-cpu-sglang.yaml").read_text())
    doc["model"]["path"] = model
    doc["transfer"]["bootstrap_port"] = free_port()
    for section in ("prefill", "decode", "router"):
        doc[section]["port"] = free_port()
    for section, keys in sections.items():
        if isinstance(doc.get(section), list):
            doc[section] = [{**item, **keys} for item in doc[section]]
        else:
            doc[section] = {**doc.get(section, {}), **keys}
    path = tmp / "topology.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def verdict(tmp: Path, topo: Path) -> list[tuple[str, str]]:
    """check-compat's failed rules for TOPO, with the stage at which each says SGLang fails."""
    done = pdctl("check-compat", str(topo), "--json", "-", cwd=tmp)
    assert done.returncode in (0, 1), done.stderr[-3000:]
    return [(f["rule"], f["stage"]) for f in json.loads(done.stdout)["findings"]
            if not f["ok"] and f["severity"] == "error"]


def failed_launch(tmp: Path, topo: Path) -> tuple[subprocess.CompletedProcess, dict]:
    """`pdctl launch TOPO --skip-compat --json -` that must fail: its result and `pdctl diagnose`'s JSON after it
    (read from the logs); nothing of the run is left."""
    run_dir = tmp / "run"
    done = pdctl("launch", str(topo), "--detach", "--skip-preflight", "--skip-compat", "--run-dir", str(run_dir),
                 "--timeout", "300", "--json", "-", cwd=tmp, timeout=600)
    try:
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
        again = pdctl("diagnose", "--run-dir", str(run_dir), "--json", "-", cwd=tmp)
        assert again.returncode == 1, again.stdout + again.stderr
        return done, json.loads(again.stdout)
    finally:
        assert_no_orphans(run_dir)


def assert_ends_with(done: subprocess.CompletedProcess, after: dict, signature: str) -> dict:
    """Launch's message and JSON end with the diagnosis whose root cause is SIGNATURE, as `pdctl diagnose` says
    afterwards; every finding is that signature (both roles carry the fault) or nothing known: the root finding."""
    assert "diagnosis (root cause first)" in done.stderr and f": {signature} (" in done.stderr, done.stderr[-3000:]
    during = json.loads(done.stdout)["diagnosis"]["findings"]
    assert during[0]["signature"] == signature, during
    assert after["findings"][0]["signature"] == signature, after
    assert {f["signature"] for f in during + after["findings"]} == {signature}, (during, after)
    return after["findings"][0]


def test_an_invalid_flag_value_at_launch_is_sglangs_parser(tmp_path: Path, model: str) -> None:
    topo = topology(tmp_path, model, server={"args": {"schedule-policy": "fastest"}})
    done, after = failed_launch(tmp_path, topo)
    root = assert_ends_with(done, after, "sglang-bad-flag")
    assert "argument --schedule-policy: invalid choice: 'fastest'" in root["line"], root
    assert "server.args" in root["fix"] and root["component"] == "SGLang server"


def test_a_port_sglang_binds_taken_at_launch_is_address_in_use(tmp_path: Path, model: str) -> None:
    with socket.socket() as squatter:  # another process's listener on the port SGLang's torch.distributed binds
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind(("", free_port()))
        squatter.listen(1)
        port = squatter.getsockname()[1]
        topo = topology(tmp_path, model, server={"args": {"nccl-port": port}})
        done, after = failed_launch(tmp_path, topo)
    root = assert_ends_with(done, after, "address-in-use")
    assert str(port) in root["line"], root  # torch.distributed's store names the port it could not take
    assert "ss -ltnp" in root["fix"]


@pytest.fixture(scope="module")
def hetero(tmp_path_factory: pytest.TempPathFactory, model: str) -> Iterator[dict]:
    """Prefill TP2 -> decode TP1 over NIXL into the CPU node's host memory, launched past check-compat."""
    tmp = tmp_path_factory.mktemp("nixl-hetero")
    timeouts = {"SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": str(DISAGG_TIMEOUT_S),
                "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": str(DISAGG_TIMEOUT_S)}
    topo = topology(tmp, model, nodes={"gpus": 3}, prefill={"tp": 2}, engine={"env": timeouts})
    # the live agreement matrix's row: check-compat says SGLang fails at the first transfer, not before
    assert verdict(tmp, topo) == [("nixl-hetero-tp-host-memory", "first transfer")]
    run_dir = tmp / "run"
    done = pdctl("launch", str(topo), "--detach", "--skip-preflight", "--skip-compat", "--run-dir", str(run_dir),
                 "--timeout", "400", cwd=tmp, timeout=900)
    try:
        assert done.returncode == 0, done.stderr[-4000:]
        yield {"tmp": tmp, "run_dir": run_dir, "launch": " ".join(done.stderr.split())}
    finally:
        resume_and_down(run_dir, tmp)
        assert_no_orphans(run_dir)


def test_sglangs_nixl_host_memory_guard_is_the_root_cause_with_its_fix(hetero: dict) -> None:
    # check-compat predicts SGLang's refusal: launch --skip-compat says what it did not enforce
    assert "nixl-hetero-tp-host-memory" in hetero["launch"], hetero["launch"]
    prefill_log = Path(record(hetero, "prefill-0")["log"])
    url = record(hetero, "router")["url"]
    body = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
    try:  # the router retries the refused request for minutes: its answer is not waited for, the logs say it all
        answer: requests.Response | Exception = requests.post(url + "/generate", json=body, timeout=(10, 30))
    except requests.RequestException as exc:
        answer = exc
    assert not (isinstance(answer, requests.Response) and answer.status_code == 200), answer.text
    wait_for(lambda: NIXL_HETERO_TP_HOST in prefill_log.read_text(errors="replace"), timeout=120,
             what="SGLang's NIXL guard in prefill-0's log", detail=lambda: prefill_log.read_text()[-3000:])
    seen: list[dict] = []

    def decode_gave_up() -> bool:  # decode waits SGLANG_DISAGGREGATION_WAITING_TIMEOUT for the KV, then says so
        done = pdctl("diagnose", "--run-dir", str(hetero["run_dir"]), "--json", "-", cwd=hetero["tmp"], timeout=120)
        assert done.returncode == 1, done.stdout[-3000:] + done.stderr[-3000:]
        seen[:] = [json.loads(done.stdout)]
        return any(f["process"] == "decode-0" for f in seen[0]["findings"])

    wait_for(decode_gave_up, timeout=180, interval=2, what="decode-0's finding in pdctl diagnose",
             detail=lambda: json.dumps(seen, indent=1)[-3000:])
    doc = seen[0]
    root = doc["findings"][0]
    assert (root["process"], root["signature"]) == ("prefill-0", "sglang-nixl-hetero-tp-host"), doc
    assert "host memory" in root["cause"] and "mooncake" in root["fix"] and "same TP" in root["fix"]
    assert "nixl/conn.py" in root["source"] and root["releases"] == "SGLang >= 0.5.15"
    # decode gave up waiting for the KV the refused transfer never sent (measured: sglang-waiting-timeout), and
    # the diagnosis says it follows the guard instead of listing it as a second cause
    decode = [f for f in doc["findings"] if f["process"] == "decode-0"]
    assert decode and all(f["follows"] == "prefill-0" for f in decode), doc


@pytest.fixture(scope="module")
def page_mismatch(tmp_path_factory: pytest.TempPathFactory, model: str) -> Iterator[dict]:
    """Decode page_size 32 against prefill's 16 over NIXL, launched past check-compat."""
    tmp = tmp_path_factory.mktemp("page-mismatch")
    topo = topology(tmp, model, decode={"page_size": 32})
    run_dir = tmp / "run"
    try:  # a launch cut short (the test's timeout) still leaves nothing behind: down runs on whatever started
        done = pdctl("launch", str(topo), "--detach", "--skip-preflight", "--skip-compat", "--run-dir",
                     str(run_dir), "--timeout", "400", cwd=tmp, timeout=900)
        assert done.returncode == 0, done.stderr[-4000:]  # not refused at start-up
        yield {"tmp": tmp, "run_dir": run_dir, "topology": topo}
    finally:
        resume_and_down(run_dir, tmp)
        assert_no_orphans(run_dir)


def test_a_page_size_mismatch_fails_at_decodes_first_request_where_check_compat_says(page_mismatch: dict) -> None:
    # the live agreement matrix's handshake row: check-compat refuses decode page_size 32 against prefill 16 at
    # the handshake; live, SGLang starts both (the fixture's launch past check-compat is healthy) and decode's
    # scheduler refuses the pair at its first request (common/conn.py::try_ensure_parallel_info raises), which
    # ends decode
    tmp, run_dir = page_mismatch["tmp"], page_mismatch["run_dir"]
    assert verdict(tmp, page_mismatch["topology"]) == [("page-size-match", "handshake")]
    body = {"text": "The capital of France is", "sampling_params": {"max_new_tokens": 4, "temperature": 0}}
    try:
        answer: requests.Response | Exception = requests.post(record(page_mismatch, "router")["url"] + "/generate",
                                                              json=body, timeout=(10, 120))
    except requests.RequestException as exc:
        answer = exc
    assert not (isinstance(answer, requests.Response) and answer.status_code == 200), answer.text
    seen: list[dict] = []

    def decode_refused() -> bool:
        found = pdctl("diagnose", "--run-dir", str(run_dir), "--json", "-", cwd=tmp, timeout=120)
        seen[:] = [json.loads(found.stdout)] if found.stdout.strip() else []
        return found.returncode == 1 and any(f["process"] == "decode-0" for f in seen[0]["findings"])

    wait_for(decode_refused, timeout=180, interval=2, what="decode-0's refusal in pdctl diagnose",
             detail=lambda: json.dumps(seen, indent=1)[-3000:])
    root = seen[0]["findings"][0]
    assert (root["process"], root["signature"]) == ("decode-0", "sglang-page-size-mismatch"), seen[0]
    assert "page_size=16" in root["line"] and "page_size=32" in root["line"], root
    assert "page-size-match" in root["fix"] and root["releases"] == "SGLang >= 0.5.8"
