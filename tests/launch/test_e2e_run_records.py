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
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(topo), "--detach", "--timeout", "180",
                           "--set", "eval.gsm8k.num_questions=3"], cwd=tmp, capture_output=True, text=True,
                          timeout=400, check=False)
    try:
        assert done.returncode == 0, done.stderr
        state = wait_state(run_dir, "running", 30)
        generate(state["router"]["url"], max_new_tokens=4)  # one KV transfer, so that the path is logged
        yield {"tmp": tmp, "run_dir": run_dir, "topo": topo, "state": state, "launch": done}
    finally:
        if (run_dir / "state.json").exists():
            from pdctl.launch.shutdown import teardown

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


def test_a_launch_keeps_its_set_overrides(deployment: dict) -> None:
    import yaml

    state = json.loads((deployment["run_dir"] / "state.json").read_text())
    assert state["overrides"] == ["eval.gsm8k.num_questions=3"]
    copy = (deployment["run_dir"] / "topology.yaml").read_text()
    assert copy.startswith(f"# {deployment['topo']} with --set eval.gsm8k.num_questions=3\n")
    assert yaml.safe_load(copy)["eval"]["gsm8k"]["num_questions"] == 3


def test_eval_on_random_weights_says_why_accuracy_is_0(deployment: dict) -> None:
    """The run's topology (with its override: 3 questions) sets the eval's defaults; the reference engine's
    random weights are named as the reason the accuracy means nothing."""
    from tests.support.paths import DATA

    done = pdctl("eval", "gsm8k", "--data-file", str(DATA / "gsm8k_test_50.jsonl"), "--num-shots", "1",
                 "--max-new-tokens", "8", "--json", "-", cwd=deployment["tmp"], timeout=300)
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["num_questions"] == 3 and "seeded random weights" in doc["notes"][0]
    flat = " ".join(done.stderr.split())
    assert "note: the deployment serves pdctl's CPU reference engine, whose checkpoints are seeded random" in flat
    assert f"results: {Path(deployment['state']['run_dir']) / 'eval' / 'gsm8k.jsonl'}" in flat
