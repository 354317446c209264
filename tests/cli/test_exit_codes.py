"""`pdctl` keeps its documented exit codes (0 ok, 1 the checked thing failed, 2 bad input) on every path,
including the paths of commands that created a real transfer backend in the pdctl process itself."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.net import wait_for
from tests.support.paths import REPO
from tests.support.servers import kill_group

BENCH_CONFIG = REPO / "benchmarks" / "bench_transfer.yaml"


def _pdctl(*args: str, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pdctl", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=REPO, check=False)


def _spawn(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pdctl", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, start_new_session=True)


def _maps(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return ""


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def test_init_checkpoint_on_an_unwritable_path_exits_2(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = _pdctl("reference", "init-checkpoint", str(blocker / "ckpt"))
    assert done.returncode == 2, done.stderr
    assert "cannot create checkpoint directory" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.e2e
def test_reference_serve_exits_2_when_its_bootstrap_port_is_taken_after_creating_backends(
    ref_checkpoint: Path,
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = holder.getsockname()[1]
        done = _pdctl("reference", "serve", "--model-path", str(ref_checkpoint), "--role", "prefill", "--port", "0",
                      "--disaggregation-bootstrap-port", str(port))
    assert done.returncode == 2, done.stderr[-2000:]
    assert f"cannot bind the bootstrap server on 127.0.0.1:{port}" in done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.e2e
@pytest.mark.parametrize("backend", ["nixl", "mooncake"])
def test_reference_serve_exits_0_on_sigterm_after_serving_with_a_backend(
    ref_checkpoint: Path, tmp_path: Path, backend: str
) -> None:
    ports = tmp_path / "ports.json"
    proc = _spawn("reference", "serve", "--model-path", str(ref_checkpoint), "--role", "prefill", "--port", "0",
                  "--disaggregation-bootstrap-port", "0", "--disaggregation-transfer-backend", backend,
                  "--port-file", str(ports))
    try:
        wait_for(lambda: ports.exists() or proc.poll() is not None, timeout=180, what="the prefill to serve")
        assert ports.exists(), proc.communicate()[1][-2000:]
        assert json.loads(ports.read_text())["bootstrap_port"] > 0
        os.killpg(proc.pid, signal.SIGTERM)
        code = proc.wait(timeout=120)
    finally:
        kill_group(proc)
    assert code == 0, proc.stderr.read()[-2000:] if proc.stderr else ""


@pytest.mark.e2e
def test_bench_transfer_exits_1_when_its_decode_side_dies_after_backends_exist() -> None:
    """A real fault: the bench's decode-side process is killed once the pdctl process holds its NIXL agents."""
    proc = _spawn("bench-transfer", str(BENCH_CONFIG), "--tokens", "4096", "--repeats", "50")
    try:
        wait_for(lambda: "nixl" in _maps(proc.pid) or proc.poll() is not None, timeout=180,
                 what="pdctl bench-transfer to create its NIXL backends")
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        peers = _children(proc.pid)
        assert peers, "the bench's decode-side process is not running"
        for pid in peers:
            os.kill(pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        kill_group(proc)
    assert proc.returncode == 1, err[-3000:]
    assert "decode side of the bench" in err and "Traceback" not in err, err[-3000:]


@pytest.mark.parametrize("args", [
    ["check-compat", "configs/does-not-exist.yaml"],
    ["check-compat", "configs/local-cpu.yaml", "--tokens", "0"],  # fails while click parses options
    ["plan", "configs/local-cpu-reference.yaml"],  # colocated: no KV transfer to plan
    ["status", "--run-dir", "/nonexistent/pdctl-run"],
    ["launch", "configs/does-not-exist.yaml", "--dry-run"],
    ["parity", "--candidate", "not-a-url", "--reference", "http://127.0.0.1:1"],
])
def test_every_command_writes_the_error_document_on_exit_2(args: list[str], tmp_path: Path) -> None:
    out = tmp_path / "err.json"
    done = _pdctl(*args, "--json", str(out), timeout=120)
    assert done.returncode == 2, (done.stdout, done.stderr)
    doc = json.loads(out.read_text())
    assert set(doc) == {"ok", "error"} and doc["ok"] is False and doc["error"]
    assert "Traceback" not in done.stderr
    # '-' puts the document on stdout
    done = _pdctl(*args, "--json", "-", timeout=120)
    assert done.returncode == 2 and json.loads(done.stdout)["ok"] is False


@pytest.mark.parametrize(
    "args",
    [
        ["check-compat", str(REPO / "configs" / "local-cpu.yaml"), "--json", "{blocker}/out.json"],
        ["plan", str(REPO / "configs" / "local-cpu.yaml"), "--json", "{tmp}"],
        ["eval", "gsm8k", "--url", "http://127.0.0.1:9", "--results", "{blocker}/r.jsonl"],
        ["parity", "--candidate", "http://127.0.0.1:9", "--reference", "http://127.0.0.1:9", "--report",
         "{blocker}/r.html"],
    ],
    ids=["check-compat-json", "plan-json-dir", "eval-results", "parity-report"],
)
def test_an_unwritable_output_is_refused_before_any_work(tmp_path: Path, args: list[str]) -> None:
    """Issue 16: `--json` to an unwritable path printed the whole report, then exited 2: the verdict was lost.
    Every output file is now tried before the command does its work."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    done = _pdctl(*[a.format(blocker=blocker, tmp=tmp_path) for a in args])
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "Invalid value for" in done.stderr and ("cannot write" in done.stderr or "is a directory" in done.stderr)
    assert done.stdout == "", "the command did its work (printed its report) before refusing its output file"


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "gsm8k", "--url", "http://127.0.0.1:9", "--floor", "nan"],  # accuracy < nan is never true: a false OK
        ["parity", "--candidate", "http://127.0.0.1:9", "--reference", "http://127.0.0.1:9", "--tolerance", "inf"],
        ["launch", str(REPO / "configs" / "local-cpu.yaml"), "--timeout", "nan"],  # was int(nan): a traceback
        ["bench", "serve", "--url", "http://127.0.0.1:9", "--request-rate", "nan"],
    ],
    ids=["eval-floor-nan", "parity-tolerance-inf", "launch-timeout-nan", "bench-serve-rate-nan"],
)
def test_non_finite_numbers_are_bad_input(args: list[str]) -> None:
    done = _pdctl(*args)
    assert done.returncode == 2, done.stderr
    assert "is not a finite number" in done.stderr and "Traceback" not in done.stderr
