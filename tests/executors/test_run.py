"""The executors' `run` (a short command to completion) and `popen` (a conversation with a process on the
node) primitives, locally and over a real sshd: output, exit codes, literal arguments and environment, the
timeout, and ssh's own failure."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from pdctl.executors import node_executor
from pdctl.executors.local import LocalExecutor, proc_stat
from pdctl.executors.ssh import SSHExecutor
from pdctl.topology import build_topology
from tests.support.net import wait_for
from tests.support.sshd import SSHServer, sshd_missing_reason, start_sshd

EVIL = "'; touch {marker}; echo \"$(touch {marker})\" `touch {marker}` ;#"


def test_local_run_captures_output_code_and_env() -> None:
    code = "import os, sys; print(os.environ['PD13_X']); print('err', file=sys.stderr); sys.exit(3)"
    done = LocalExecutor().run([sys.executable, "-c", code], timeout=30, env={"PD13_X": "a b"})
    assert (done.returncode, done.stdout, done.stderr) == (3, "a b\n", "err\n")
    missing = LocalExecutor().run(["/nonexistent/pdctl-python"], timeout=5)
    assert missing.returncode == 127 and "No such file" in missing.stderr


def test_local_run_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    done = LocalExecutor().run(["sh", "-c", f"sleep 300 & echo $! > {pid_file}; wait"], timeout=1)
    assert done.returncode is None and "timed out" in done.stderr
    child = int(pid_file.read_text())
    # The command's own child did not outlive the timeout: SIGKILL went to the group, and the child (now
    # init's) is gone or a zombie once the kernel has finished its exit (not necessarily at this instant).
    wait_for(lambda: (proc_stat(child) or ("Z",))[0] == "Z", timeout=30, what=f"pid {child} to die")


def test_node_executor_follows_the_node() -> None:
    topo = build_topology({
        "name": "t", "model": {"path": "openai/gpt-oss-20b"},
        "nodes": [{"name": "a", "host": "10.0.0.1", "gpu": "h100", "gpus": 8},
                  {"name": "b", "host": "node-b", "gpu": "h100", "gpus": 8, "ssh": {"user": "u", "port": 2222}}],
        "prefill": {"nodes": ["a"]}, "decode": {"nodes": ["b"]},
    }, source="<test>")
    assert node_executor(topo.node("a")).kind == "local"
    remote = node_executor(topo.node("b"))
    assert isinstance(remote, SSHExecutor) and remote.host == "node-b" and remote.ssh["port"] == 2222
    slurm = node_executor(topo.node("b"), kind="slurm")
    assert slurm.kind == "slurm" and slurm.node == "node-b"


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory):
    reason = sshd_missing_reason()
    if reason:
        pytest.skip(reason)
    server = start_sshd(tmp_path_factory.mktemp("sshd-run"))
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.e2e
def test_ssh_run_keeps_arguments_and_env_literal(tmp_path: Path, sshd: SSHServer) -> None:
    marker = tmp_path / "injected"
    evil = EVIL.format(marker=marker)
    executor = SSHExecutor("127.0.0.1", sshd.ssh_config())
    done = executor.run([sys.executable, "-c", "import os, sys; print(sys.argv[1]); print(os.environ['PD13_E'])",
                         evil], timeout=30, env={"PD13_E": evil})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == [evil, evil] and not marker.exists()
    assert executor.run(["sh", "-c", "exit 7"], timeout=30).returncode == 7


@pytest.mark.e2e
def test_ssh_failure_is_255_with_the_reason(sshd: SSHServer) -> None:
    config = {**sshd.ssh_config(), "port": 1}  # nothing listens on port 1
    done = SSHExecutor("127.0.0.1", config).run(["true"], timeout=30)
    assert done.returncode == 255 and "refused" in done.stderr.lower()


@pytest.mark.e2e
def test_ssh_popen_is_a_conversation_that_ends_with_stdin(sshd: SSHServer) -> None:
    script = "import sys\nfor line in sys.stdin:\n    print('got', line.strip(), flush=True)\nprint('eof', flush=True)"
    proc = SSHExecutor("127.0.0.1", sshd.ssh_config()).popen([sys.executable, "-c", script], env={"A": "1"})
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("hello there\n")
        proc.stdin.flush()
        assert proc.stdout.readline() == "got hello there\n"
        proc.stdin.close()  # the remote process reads EOF and ends by itself
        assert proc.stdout.readline() == "eof\n"
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, 9)
            proc.wait(timeout=10)
