"""Launch failures end fast and clean: exit 1, the failing process named with its log tail, no orphans.

Real processes throughout (the reference engine, real sockets); nothing is mocked.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pdctl.errors import CheckFailed
from pdctl.launch.deploy import launch_topology
from pdctl.topology import load_topology
from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import local_cpu
from tests.support.orphans import assert_no_orphans, started_records

pytestmark = pytest.mark.e2e


def test_worker_that_exits_at_start_fails_the_launch_via_cli(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = local_cpu(
        tmp_path, ref_checkpoint, name="exits-at-start", prefill={"args": {"kv-cache-dtype": "no-such-dtype"}}
    )
    run_dir = tmp_path / "run"
    done = pdctl(
        "launch",
        str(topo),
        "--run-dir",
        str(run_dir),
        "--timeout",
        "60",
        "--skip-compat",
        "--detach",
        cwd=tmp_path,
    )
    assert done.returncode == 1, done.stderr
    stderr = " ".join(done.stderr.split())  # rich wraps long lines
    assert "prefill-0 on node local exited with code 2 before it was healthy" in stderr, stderr
    assert "invalid choice: 'no-such-dtype'" in stderr  # the log tail
    assert "Traceback" not in stderr.split("--- last")[0]
    assert {r["name"] for r in started_records(run_dir)} == {"prefill-0", "decode-0"}
    assert json.loads((run_dir / "state.json").read_text())["status"] == "failed"
    assert_no_orphans(run_dir)


def test_port_already_in_use_fails_before_starting_anything(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = load_topology(local_cpu(tmp_path, ref_checkpoint, name="port-taken"))
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", topo.decode.port))
        holder.listen()
        with pytest.raises(CheckFailed) as err:
            launch_topology(topo, tmp_path / "run", timeout=60, skip_compat=True)
    assert (
        f"decode-0 (node local) cannot start: port {topo.decode.port} on 127.0.0.1 is already in use"
        in err.value.message
    )
    assert started_records(tmp_path / "run") == []


def test_worker_never_healthy_times_out(tmp_path: Path, ref_checkpoint: Path) -> None:
    # The engine's "python" starts and then hangs: a worker that can never become healthy, whatever the load.
    hang = tmp_path / "hanging-python"
    hang.write_text("#!/bin/sh\necho 'starting (and never serving)'\nexec sleep 600\n")
    hang.chmod(0o755)
    topo = load_topology(local_cpu(tmp_path, ref_checkpoint, name="never-healthy", engine={"python": str(hang)}))
    with pytest.raises(CheckFailed) as err:
        launch_topology(topo, tmp_path / "run", timeout=3, skip_compat=True)
    assert "was not healthy within the timeout" in err.value.message
    assert err.value.message.startswith(("prefill-0 on node local", "decode-0 on node local"))
    assert "--- last 30 lines of" in (err.value.detail or "")
    assert len(started_records(tmp_path / "run")) == 2
    assert_no_orphans(tmp_path / "run")


def test_ctrl_c_while_waiting_tears_everything_down(tmp_path: Path, ref_checkpoint: Path) -> None:
    import signal

    from tests.support.launch_e2e import wait_state

    topo = local_cpu(tmp_path, ref_checkpoint, name="ctrl-c")
    run_dir = tmp_path / "run"
    launcher = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pdctl",
            "launch",
            str(topo),
            "--run-dir",
            str(run_dir),
            "--timeout",
            "120",
            "--skip-compat",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 300  # a loaded machine starts slowly: a deadline, not a timing assert
        while len(started_records(run_dir) if (run_dir / "state.json").exists() else []) < 2:
            assert time.monotonic() < deadline and launcher.poll() is None
            time.sleep(0.1)
        launcher.send_signal(signal.SIGINT)
        launcher.wait(timeout=30)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    assert launcher.returncode == 130
    assert wait_state(run_dir, "stopped", 5)["status"] == "stopped"
    assert_no_orphans(run_dir)


def test_incompatible_topology_is_refused_before_anything_starts(
    tmp_path: Path, ref_checkpoint: Path
) -> None:
    from tests.support.launch_e2e import pdctl

    topo = local_cpu(tmp_path, ref_checkpoint, name="incompatible", decode={"page_size": 32})
    done = pdctl("launch", str(topo), "--run-dir", str(tmp_path / "run"), "--detach", cwd=tmp_path)
    assert done.returncode == 1
    assert "not compatible" in done.stderr and "--skip-compat" in done.stderr
    assert not (tmp_path / "run" / "state.json").exists()


def test_truncated_checkpoint_weights_name_the_file_and_the_process(tmp_path: Path, ref_checkpoint: Path) -> None:
    import shutil

    broken = tmp_path / "ckpt"
    shutil.copytree(ref_checkpoint, broken)
    weights = next(broken.glob("*.safetensors"))
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])  # a copy cut off half way
    topo = local_cpu(tmp_path, broken, name="truncated")
    run_dir = tmp_path / "run"
    done = pdctl("launch", str(topo), "--run-dir", str(run_dir), "--timeout", "120", "--skip-compat",
                 "--skip-preflight", "--detach", cwd=tmp_path, timeout=300)
    flat = " ".join(done.stderr.split())
    assert done.returncode == 1, flat
    assert "on node local exited with code" in flat and "before it was healthy" in flat, flat
    assert str(weights) in flat or weights.name in flat, flat  # the log tail names the file
    assert_no_orphans(run_dir)


def test_a_run_dir_on_a_full_filesystem_is_a_clear_error_and_nothing_is_half_written(
    tmp_path: Path, ref_checkpoint: Path
) -> None:
    """A real full filesystem: a 1 MiB tmpfs (root, as in CI), filled before the launch."""
    mount = tmp_path / "full"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)], check=True)
    try:
        with open(mount / "filler", "wb") as fh:
            try:
                while True:
                    fh.write(b"\0" * 65536)
                    fh.flush()
            except OSError:
                pass  # full
        topo = local_cpu(tmp_path, ref_checkpoint, name="full-disk")
        run_dir = mount / "run"
        done = pdctl("launch", str(topo), "--run-dir", str(run_dir), "--timeout", "60", "--skip-preflight",
                     "--detach", cwd=tmp_path)
        flat = " ".join(done.stderr.split())
        assert done.returncode == 2, flat
        # the first record a launch writes is its lock.json (issue 27), then plan.json and state.json
        assert f"cannot write {run_dir / 'lock.json'}: No space left on device" in flat, flat
        assert "Traceback" not in done.stderr
        assert sorted(p.name for p in run_dir.iterdir()) == []  # no lock/plan/state.json, no .tmp
    finally:
        subprocess.run(["umount", str(mount)], check=True)
