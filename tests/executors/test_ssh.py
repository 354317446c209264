"""The ssh executor against a real sshd on 127.0.0.1 (tests/support/sshd.py): start, logs, stop, quoting."""

from __future__ import annotations

import shlex
import signal
import sys
import time
from pathlib import Path

import pytest

from pdctl.errors import CheckFailed
from pdctl.executors.local import proc_stat
from pdctl.executors.ssh import SSHExecutor, ssh_argv
from pdctl.launch.deploy import launch_topology
from pdctl.render.spec import ProcessSpec
from pdctl.topology import load_topology
from tests.support.launch_samples import local_cpu
from tests.support.net import wait_for
from tests.support.orphans import assert_no_orphans, started_records
from tests.support.sshd import SSHServer, sshd_missing_reason, start_sshd

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(sshd_missing_reason() is not None, reason=str(sshd_missing_reason())),
]
EVIL = '\'; touch {marker}; echo "$(touch {marker})" `touch {marker}` & rm -rf /nonexistent-pdctl ;#'


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    server = start_sshd(tmp_path_factory.mktemp("sshd"))
    try:
        yield server
    finally:
        server.stop()


def test_remote_command_is_one_quoted_sh_script() -> None:
    argv = ssh_argv(
        "host; reboot", {"port": 2222, "user": "u", "key": "/k", "options": {"A": "b c"}}, "echo 'x'; y"
    )
    assert argv[:4] == ["ssh", "-o", "BatchMode=yes", "-o"]
    assert argv[argv.index("--") + 1] == "host; reboot"  # the host is one argv element, never a shell word
    assert shlex.split(argv[-1]) == ["sh", "-c", "echo 'x'; y"]
    assert ["-o", "A=b c"] == argv[argv.index("A=b c") - 1 : argv.index("A=b c") + 1]


def test_start_logs_and_stop_a_process_over_ssh(tmp_path: Path, sshd: SSHServer) -> None:
    marker = tmp_path / "injected"
    evil = EVIL.format(marker=marker)
    script = (
        "import os, sys, time; print('argv', sys.argv[1:], flush=True); "
        "print('env', os.environ['PDCTL_INJECT'], flush=True); time.sleep(120)"
    )
    proc = ProcessSpec(
        name="sleeper",
        role="prefill",
        replica=0,
        node="n0",
        host="127.0.0.1",
        node_rank=0,
        argv=[sys.executable, "-c", script, evil],
        env={"PDCTL_INJECT": evil},
        ssh=sshd.ssh_config(),
    )
    executor = SSHExecutor("127.0.0.1", sshd.ssh_config())
    log = str(tmp_path / "logs dir" / "sleeper.log")  # a space in the path, too
    record = {"name": "sleeper", "log": log, **executor.start(proc, log)}
    try:
        stat = proc_stat(record["pid"])
        assert stat is not None and stat[1] == record["pid"] == record["pgid"]  # leads its own group
        wait_for(lambda: "env" in Path(log).read_text(), timeout=60, what="the remote process to write its log")  # the "remote" is this machine: wait without ssh
        text = executor.read_log(record, 10)  # then fetch it the way `pdctl logs` does
        assert f"argv [{evil!r}]" in text and f"env {evil}" in text
        environ = Path(f"/proc/{record['pid']}/environ").read_bytes().split(b"\0")
        assert f"PDCTL_INJECT={evil}".encode() in environ
        assert not marker.exists()
        assert executor.exit_code(record) is None and executor.group_alive(record)
        assert executor.stop(record, 5.0) == "stopped"
        assert not executor.group_alive(record) and executor.exit_code(record) == -1
        assert executor.stop(record, 5.0) == "not running"
    finally:
        executor.signal_group(record, signal.SIGKILL)
    assert not marker.exists()


def test_port_in_use_on_a_remote_node_names_the_process_with_its_log(
    tmp_path: Path, ref_checkpoint: Path, sshd: SSHServer
) -> None:
    # remote ports cannot be pre-checked from here: the server itself fails to bind, and says so in its log
    import socket

    topo = load_topology(local_cpu(tmp_path, ref_checkpoint, name="ssh-port-taken", ssh=sshd.ssh_config()))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", topo.decode.port))
        holder.listen()
        t0 = time.monotonic()
        with pytest.raises(CheckFailed) as err:
            launch_topology(topo, tmp_path / "run", timeout=90, skip_compat=True)
    assert time.monotonic() - t0 < 90
    message = err.value.message
    assert message.splitlines()[0] == "decode-0 on node local exited before it was healthy"
    assert "decode-0: ref-bind" in message  # the diagnosis (pdctl.diagnose) ends the message: the port taken
    assert "address already in use" in (err.value.detail or "").lower()
    assert {r["executor"] for r in started_records(tmp_path / "run")} == {"ssh"}
    assert_no_orphans(tmp_path / "run")


def test_shared_connections_reuse_one_login_and_leave_nothing_behind(tmp_path: Path) -> None:
    """Inside shared_connections() every command to a node rides one ssh connection (ControlMaster); at the
    end the master is closed and its socket directory removed. Outside, each command logs in again."""
    from pdctl.executors import shared_connections

    server = start_sshd(tmp_path / "sshd", log_level="INFO")
    try:
        executor = SSHExecutor(server.host, server.ssh_config())
        before = server.logins()
        with shared_connections() as directory:
            for _ in range(4):
                assert executor.run(["true"], timeout=30).returncode == 0
            proc = executor.popen(["cat"])
            out, _ = proc.communicate("over the shared connection\n", timeout=30)
            assert out == "over the shared connection\n"
            sockets = list(directory.iterdir())
        assert len(sockets) == 1 and server.logins() - before == 1
        assert not directory.exists()
        masters = [line for line in _ps() if str(directory) in line]
        assert masters == [], masters
        for _ in range(2):
            assert executor.run(["true"], timeout=30).returncode == 0
        assert server.logins() - before == 3  # no sharing outside the block
    finally:
        server.stop()


def test_a_node_s_own_control_path_is_kept() -> None:
    from pdctl.executors import shared_connections

    own = {"options": {"ControlPath": "/run/user/ssh-%C", "ControlMaster": "auto"}}
    with shared_connections() as directory:
        assert str(directory) not in " ".join(ssh_argv("h", own, "true"))
        assert f"ControlPath={directory}/%C" in ssh_argv("h", {}, "true")
    assert not any("ControlPath" in word for word in ssh_argv("h", {}, "true"))


def _ps() -> list[str]:
    import subprocess

    return subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=True).stdout.splitlines()
