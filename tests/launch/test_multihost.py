"""Multi-host deployments for real: prefill on host a, decode on host b, the router on host c (namespaced
hosts with their own addresses, hostnames and sshds: tests/support/multihost.py), launched with `pdctl launch`
through the ssh executor, once per transfer backend. One deployment per backend serves every assertion:
preflight ran first, each process runs on its host, decode reached prefill's bootstrap at host a's address,
KV crossed the bridge (host b's interface counters, UCX's / Mooncake's own report in `pdctl status`), logs and
`down` work across hosts."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import requests

from tests.support.launch_e2e import generate, pdctl
from tests.support.multihost import pd_topology, start_multihost
from tests.support.netns import netns_missing_reason
from tests.support.orphans import live_pids, started_records
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]
LETTER = {"prefill": "a", "decode": "b", "router": "c"}
# KV of one prompt token on the wire: reference-tiny has 4 layers x 2 KV heads x 16 head_dim, K and V, float32
PROMPT = "The capital of France is Paris, and the capital of Italy is Rome. " * 8


@pytest.fixture(scope="module", params=["nixl", "mooncake"])
def deployment(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    backend = request.param
    tmp = tmp_path_factory.mktemp(f"multihost-{backend}")
    mh = start_multihost(tmp, sshd_log_level="INFO")
    run_dir = tmp / "run"
    try:
        topo = pd_topology(mh, tmp, ref_checkpoint, backend=backend, name=f"mh-{backend}")
        done = pdctl("launch", str(topo), "--detach", "--skip-compat", "--run-dir", str(run_dir),
                     "--timeout", "240", "--json", "-", cwd=tmp, timeout=400)
        assert done.returncode == 0, done.stderr[-4000:]
        yield {"mh": mh, "tmp": tmp, "run_dir": run_dir, "state": json.loads(done.stdout), "backend": backend,
               "launch_stderr": done.stderr}
    finally:
        try:
            if (run_dir / "state.json").exists():
                pdctl("down", "--run-dir", str(run_dir), cwd=tmp, timeout=120)
        finally:
            mh.stop()


def _netns_pids(netns: str) -> set[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return {int(p) for p in out.split()}


def test_preflight_ran_first_and_passed(deployment: dict) -> None:
    err = deployment["launch_stderr"]
    assert "preflight passed" in err, err[-2000:]
    path = "tcp/pd0 (inter-node)" if deployment["backend"] == "nixl" else "mooncake tcp via pd0"
    assert "transfer pa -> db" in err and path in err, err[-2000:]


def test_each_process_runs_on_its_host_and_advertises_its_address(deployment: dict) -> None:
    mh = deployment["mh"]
    for record in started_records(deployment["run_dir"]):
        host = mh[LETTER[record["role"]]]
        assert record["executor"] == "ssh" and record["host"] == host.address
        assert record["pid"] in _netns_pids(host.netns), f"{record['name']} is not in {host.netns}"
        if record["role"] != "router":
            assert record["url"].startswith(f"http://{host.address}:") and record["advertise"] == host.address


def test_kv_crosses_hosts_and_decode_reaches_prefill_bootstrap_at_a(deployment: dict) -> None:
    mh = deployment["mh"]
    before = mh["b"].iface_bytes()
    response = requests.post(deployment["state"]["router"]["url"] + "/generate", timeout=120, json={
        "text": PROMPT, "sampling_params": {"max_new_tokens": 4, "temperature": 0.0, "ignore_eos": True}})
    assert response.status_code == 200, response.text
    out = response.json()
    after = mh["b"].iface_bytes()
    assert out["meta_info"]["completion_tokens"] == 4
    prompt_tokens = out["meta_info"]["prompt_tokens"]
    kv_bytes = prompt_tokens * 4 * 2 * 16 * 2 * 4  # layers x heads x head_dim x (K, V) x float32
    assert after[0] - before[0] >= kv_bytes, (before, after, kv_bytes)  # received by host b over its veth
    decode_log = Path(next(r["log"] for r in started_records(deployment["run_dir"]) if r["role"] == "decode"))
    bootstrap = deployment["state"]["processes"][0]["url"]  # prefill's URL host is host a's address
    assert f"with prefill {mh['a'].address}:" in decode_log.read_text(), bootstrap


def _status(deployment: dict) -> dict:
    done = pdctl("status", "--run-dir", str(deployment["run_dir"]), "--json", "-", cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_status_over_ssh_logs_in_once_per_host(deployment: dict) -> None:
    """`pdctl status` asks each process (alive?) and each prefill server (its KV path) over ssh: one shared
    connection per host serves them all (pdctl.executors.shared_connections)."""
    mh = deployment["mh"]
    before = {x: mh.sshd[x].logins() for x in "abc"}
    _status(deployment)
    assert {x: mh.sshd[x].logins() - n for x, n in before.items()} == {"a": 1, "b": 1, "c": 1}


def test_status_shows_addresses_and_the_path_the_kv_took(deployment: dict) -> None:
    before = _status(deployment)
    generate(deployment["state"]["router"]["url"], max_new_tokens=2)  # a transfer has happened
    doc = _status(deployment)
    prefill = next(p for p in doc["processes"] if p["role"] == "prefill")
    assert prefill["advertise"] == deployment["mh"]["a"].address
    # live figures, fetched over HTTP from this machine across the bridge (hosts a, b, c), count the request
    grown = {p["name"]: p["metrics"]["totals"]["transfers_ok"] - q["metrics"]["totals"]["transfers_ok"]
             for p, q in zip(doc["processes"], before["processes"])}
    assert grown == {"prefill-0": 1, "decode-0": 1}, grown
    assert doc["router"]["metrics"]["totals"]["requests"] - before["router"]["metrics"]["totals"]["requests"] == 1
    if deployment["backend"] == "nixl":
        assert prefill["transfer_path"].startswith("nixl: tcp/pd0") and "crosses nodes" in prefill["transfer_path"]
    else:
        assert prefill["transfer_path"].startswith(f"mooncake: tcp at {deployment['mh']['a'].address}")
    human = pdctl("status", "--run-dir", str(deployment["run_dir"]), cwd=deployment["tmp"])
    assert "KV path of prefill-0 (pa)" in human.stdout


def test_logs_and_down_across_hosts(deployment: dict) -> None:
    logs = pdctl("logs", "decode", "--run-dir", str(deployment["run_dir"]), "--tail", "200", cwd=deployment["tmp"])
    assert logs.returncode == 0 and "--role decode" in logs.stdout
    records = started_records(deployment["run_dir"])
    pids = {int(r["pid"]) for r in records}
    assert live_pids(pids) == pids
    done = pdctl("down", "--run-dir", str(deployment["run_dir"]), cwd=deployment["tmp"], timeout=120)
    assert done.returncode == 0, done.stderr
    assert live_pids(pids) == set()
    for letter in "abc":
        assert not _netns_pids(deployment["mh"][letter].netns) - {deployment["mh"][letter].anchor.pid} - {
            s.proc.pid for s in [deployment["mh"].sshd[letter]]
        }, f"host {letter} still runs processes of the deployment"
