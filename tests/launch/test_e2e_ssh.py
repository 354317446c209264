"""End to end through the ssh executor: the local CPU topology whose node is reached over a real sshd on
127.0.0.1; /generate through the router, status, logs fetched over ssh, down leaves no pid alive. The
topology's environment carries shell-injection text, which must arrive literally."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pdctl.launch.deploy import launch_topology
from pdctl.launch.shutdown import teardown
from pdctl.topology import load_topology
from tests.support.launch_e2e import generate, pdctl
from tests.support.launch_samples import local_cpu
from tests.support.orphans import assert_no_orphans, group_pids, live_pids, started_records
from tests.support.sshd import sshd_missing_reason, start_sshd

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sshd_missing_reason() is not None, reason=str(sshd_missing_reason())),
]


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("e2e-ssh")
    sshd = start_sshd(tmp / "sshd")
    marker = tmp / "injected"
    evil = f'\'; touch {marker}; echo "$(touch {marker})" `touch {marker}` ;#'
    run_dir = tmp / "run"
    try:
        topo = load_topology(
            local_cpu(
                tmp,
                ref_checkpoint,
                name="e2e-ssh",
                ssh=sshd.ssh_config(),
                engine={"env": {"PDCTL_INJECT": evil}},
            )
        )
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(tmp)  # the launch records ./.pdctl/latest: not in the checkout
            state = launch_topology(topo, run_dir, timeout=180, skip_compat=True, detach=True)
        yield {"tmp": tmp, "run_dir": run_dir, "state": state, "marker": marker, "evil": evil}
    finally:
        try:
            if (run_dir / "state.json").exists():
                teardown(run_dir, grace_s=5)
        finally:
            sshd.stop()


def test_processes_run_through_ssh_with_literal_environment(deployment: dict) -> None:
    # (the servers' /proc/PID/environ is overwritten by setproctitle, so the literal value is checked in
    # the command line pdctl logged remotely; test_ssh.py checks a live process's environment itself)
    import shlex

    records = started_records(deployment["run_dir"])
    assert {r["executor"] for r in records} == {"ssh"}
    for record in records:
        header = Path(record["log"]).read_text().splitlines()[0]
        assert header.startswith("# pdctl: env ")
        assert f"PDCTL_INJECT={deployment['evil']}" in shlex.split(header[len("# pdctl: ") :])
    assert not deployment["marker"].exists()


def test_generate_through_the_router(deployment: dict) -> None:
    out = generate(deployment["state"]["router"]["url"], max_new_tokens=3)
    assert out["meta_info"]["completion_tokens"] == 3


def test_status_and_logs_over_ssh(deployment: dict) -> None:
    run_dir = str(deployment["run_dir"])
    done = pdctl("status", "--run-dir", run_dir, "--json", "-", cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] and [p["executor"] for p in doc["processes"]] == ["ssh", "ssh"]
    logs = pdctl("logs", "decode", "--run-dir", run_dir, "--tail", "100", cwd=deployment["tmp"])
    assert logs.returncode == 0 and "--role decode" in logs.stdout


def test_down_over_ssh_leaves_no_process(deployment: dict) -> None:
    pids = group_pids(started_records(deployment["run_dir"]))
    assert live_pids(pids) == pids
    done = pdctl("down", "--run-dir", str(deployment["run_dir"]), cwd=deployment["tmp"])
    assert done.returncode == 0, done.stderr
    assert live_pids(pids) == set()
    assert_no_orphans(deployment["run_dir"])
