"""A running deployment as a new user meets it (issue 20): a dry run of the same topology leaves the live run's
records alone, `transfer.protocol: tcp` is what the KV really takes, and the workers' logs carry no
`Invalid HTTP request` warning from the router's protocol probe."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.launch_e2e import generate, pdctl, wait_state
from tests.support.launch_samples import local_cpu

pytestmark = [pytest.mark.e2e]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("e2e-records")
    topo = local_cpu(tmp, ref_checkpoint, name="e2e-records")
    run_dir = tmp / ".pdctl" / "runs" / "e2e-records"
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--timeout", "180"],
                          cwd=tmp, capture_output=True, text=True, timeout=400, check=False)
    try:
        assert done.returncode == 0, done.stderr
        state = wait_state(run_dir, "running", 30)
        generate(state["router"]["url"], max_new_tokens=4)  # one KV transfer, so that the path is logged
        yield {"tmp": tmp, "run_dir": run_dir, "topo": topo, "state": state, "launch": done}
    finally:
        if (run_dir / "state.json").exists():
            from pdctl.launch import teardown

            teardown(run_dir, grace_s=5)


def test_a_dry_run_never_touches_a_live_runs_records(deployment: dict) -> None:
    run_dir = deployment["run_dir"]
    before = {name: (run_dir / name).read_bytes() for name in ("plan.json", "state.json", "topology.yaml")}
    # same name: the same default run dir as the live run; another --timeout: another router command
    done = pdctl("launch", str(deployment["topo"]), "--dry-run", "--timeout", "123", cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    assert "holds a run's records" in " ".join(done.stderr.split())
    dry = json.loads((run_dir / "dry-run" / "plan.json").read_text())
    assert "123" in dry["router"]["argv"]
    done = pdctl("launch", str(deployment["topo"]), "--dry-run", "--set", "decode.tp=2", "--set", "nodes[0].gpus=6",
                 cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    assert {name: (run_dir / name).read_bytes() for name in before} == before
    dry = json.loads((run_dir / "dry-run" / "plan.json").read_text())
    assert any("--tp 2" in p["command"] and p["role"] == "decode" for p in dry["processes"])
    status = pdctl("status", "--json", "-", cwd=deployment["tmp"])  # the live run reads as it did
    assert status.returncode == 0, status.stderr


def test_tcp_protocol_is_what_the_kv_takes(deployment: dict) -> None:
    plan = json.loads((deployment["run_dir"] / "plan.json").read_text())
    assert {p["env"].get("UCX_TLS") for p in plan["processes"]} == {"tcp"}
    assert "over tcp/lo" in " ".join(deployment["launch"].stderr.split())  # launch's preflight transfer
    status = json.loads(pdctl("status", "--json", "-", cwd=deployment["tmp"]).stdout)
    prefill = next(p for p in status["processes"] if p["role"] == "prefill")
    assert prefill["transfer_path"].startswith("nixl: tcp/lo"), prefill["transfer_path"]
    compat = pdctl("check-compat", str(deployment["topo"]), "--json", "-", cwd=deployment["tmp"])
    backend = next(f for f in json.loads(compat.stdout)["findings"] if f["rule"] == "backend-known")
    assert backend["message"] == "nixl over tcp"


def test_worker_logs_have_no_invalid_http_request(deployment: dict) -> None:
    """sglang-router probes each worker with HTTP/2 (gRPC) while registering it; the reference engine closes
    that connection instead of logging `WARNING: Invalid HTTP request received.` in every log."""
    router_log = Path(deployment["state"]["router"]["log"]).read_text(errors="replace")
    assert "detect_connection_mode" in router_log  # the probe did happen
    for record in deployment["state"]["processes"]:
        assert "Invalid HTTP request" not in Path(record["log"]).read_text(errors="replace"), record["name"]
