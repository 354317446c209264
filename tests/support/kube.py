"""The Kubernetes API emulator (tests/support/kube_cluster.py) as a running process, and a kube-config that
points the official client at it (as a real cluster's would)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml

from tests.support.paths import REPO

START_TIMEOUT_S = 60.0


def kubeconfig(path: Path, port: int) -> Path:
    """A kube-config with one cluster (the emulator), one user, one current context."""
    doc = {"apiVersion": "v1", "kind": "Config", "current-context": "emulator",
           "clusters": [{"name": "emulator", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
           "users": [{"name": "tester", "user": {"token": "emulated"}}],
           "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "tester"}}]}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


@contextmanager
def emulated_cluster(tmp: Path, *, crash: tuple[str, ...] = (), oom: tuple[str, ...] = ()) -> Iterator[Path]:
    """Run the emulator (roles in CRASH crash-loop, those in OOM are OOMKilled) and yield a kube-config for it;
    stopped afterwards."""
    port_file = tmp / "kube.port"
    log = (tmp / "kube-emulator.log").open("w")
    argv = [sys.executable, "-m", "tests.support.kube_cluster", "--port-file", str(port_file)]
    for role in crash:
        argv += ["--crash", role]
    for role in oom:
        argv += ["--oom", role]
    proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while not port_file.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"kube emulator did not start: {(tmp / 'kube-emulator.log').read_text()}")
            time.sleep(0.05)
        yield kubeconfig(tmp / "kubeconfig", int(port_file.read_text()))
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        log.close()
