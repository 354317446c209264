"""End to end, colocated mode: `pdctl launch --detach` of configs/local-cpu-reference.yaml (one plain
reference-engine server, TP1, behind the real sglang-router in regular mode), /generate through the router,
status, logs, the topology recorded with the run, then `pdctl down` leaves no pid alive."""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from pdctl.errors import CheckFailed
from pdctl.launch.deploy import launch_topology
from pdctl.topology import load_topology
from tests.support.launch_e2e import generate, pdctl
from tests.support.launch_samples import local_cpu_reference
from tests.support.orphans import assert_no_orphans, group_pids, live_pids, started_records

pytestmark = pytest.mark.e2e

GSM8K = {"num_questions": 7, "num_shots": 3, "max_new_tokens": 33, "parallel": 5}



@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("e2e-colocated")
    topo = local_cpu_reference(tmp, ref_checkpoint, name="e2e-colocated", eval={"gsm8k": GSM8K})
    run_dir = tmp / ".pdctl" / "runs" / "e2e-colocated"
    try:
        done = pdctl("launch", str(topo), "--detach", "--timeout", "120", "--json", "-", cwd=tmp, timeout=180)
        assert done.returncode == 0, done.stderr
        yield {"tmp": tmp, "run_dir": run_dir, "state": json.loads(done.stdout), "topo": topo}
    finally:
        if (run_dir / "state.json").exists():
            from pdctl.launch.shutdown import teardown

            teardown(run_dir, grace_s=5)


def test_state_records_the_server_and_the_topology(deployment: dict) -> None:
    state, run_dir = deployment["state"], deployment["run_dir"]
    assert [(p["name"], p["role"], p["replica"]) for p in state["processes"]] == [("colocated-0", "colocated", 0)]
    assert state["topology_path"] == str(deployment["topo"].resolve())
    assert (run_dir / "topology.yaml").read_text() == deployment["topo"].read_text()
    assert (deployment["tmp"] / ".pdctl" / "latest").read_text().strip() == str(run_dir.resolve())
    plan = json.loads((run_dir / "plan.json").read_text())
    assert "--worker-urls" in plan["router"]["argv"] and "--pd-disaggregation" not in plan["router"]["argv"]
    assert not [a for a in plan["processes"][0]["argv"] if a.startswith("--disaggregation")]


def test_eval_defaults_come_from_the_launched_topology(deployment: dict) -> None:
    # what `pdctl eval gsm8k` without --url uses after `pdctl launch`
    from pdctl.evals.defaults import eval_defaults
    from pdctl.evals.registry import EVALS

    values, source = eval_defaults(EVALS["gsm8k"], None, deployment["run_dir"], deployment["state"])
    assert {k: values[k] for k in GSM8K} == GSM8K, source


def test_generate_through_the_regular_router(deployment: dict) -> None:
    out = generate(deployment["state"]["router"]["url"], max_new_tokens=3)
    assert out["meta_info"]["completion_tokens"] == 3 and len(out["output_ids"]) == 3


def test_status_and_logs(deployment: dict) -> None:
    done = pdctl("status", "--json", "-", cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] and [(p["role"], p["healthy"]) for p in doc["processes"]] == [("colocated", True)]
    logs = pdctl("logs", "colocated:0", "--tail", "200", cwd=deployment["tmp"])
    assert logs.returncode == 0 and "--role colocated" in logs.stdout, logs.stderr


def test_down_leaves_no_process(deployment: dict) -> None:
    pids = group_pids(started_records(deployment["run_dir"]))
    assert len(pids) >= 2 and live_pids(pids) == pids
    done = pdctl("down", cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    assert live_pids(pids) == set(), f"left behind: {live_pids(pids)}"
    assert_no_orphans(deployment["run_dir"])


def test_remember_false_leaves_the_latest_run_alone(tmp_path: Path, ref_checkpoint: Path) -> None:
    # parity launches its reference with remember=False: the user's latest run must survive it, also a
    # launch that fails (here before anything starts: the server's port is taken)
    topo = load_topology(local_cpu_reference(tmp_path, ref_checkpoint, name="not-latest", eval={"gsm8k": GSM8K}))
    latest = tmp_path / ".pdctl" / "latest"
    latest.parent.mkdir()
    latest.write_text("/somewhere/else\n")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", topo.colocated.port))
        holder.listen()
        with pytest.raises(CheckFailed, match="already in use"):
            launch_topology(topo, tmp_path / "run", timeout=30, skip_compat=True, remember=False)
    assert latest.read_text() == "/somewhere/else\n"
    state = json.loads((tmp_path / "run" / "state.json").read_text())
    assert state["topology_path"] == str(topo.source_path) and (tmp_path / "run" / "topology.yaml").is_file()
