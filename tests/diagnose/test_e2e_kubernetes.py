"""`pdctl diagnose` of Kubernetes runs, through the official client against the API emulator
(tests/support/kube_cluster.py, its own process: its kubelet moves pods through pull, start and readiness and
serves container logs): what the pods' statuses say (the waiting reason, the previous container's end) and the
containers' logs, read as `pdctl logs` reads them. A healthy run is no failure; an image that cannot be pulled,
a container that crashes (its log's first error shown) and one OOMKilled at its limit (the kill named, not the
CrashLoopBackOff that follows it) are each named with their fix. The pods are the emulator's (no engine runs in
them): what is proven is the reading of Kubernetes' records, not an engine's failure inside a pod."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pdctl.diagnose.collect import diagnose_run
from tests.support.kube import emulated_cluster
from tests.support.paths import CONFIGS_DIR

pytestmark = pytest.mark.e2e
CONFIG = CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-k8s.yaml"


def run(kubeconfig: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
    return subprocess.run([sys.executable, "-m", "pdctl", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def launch_and_diagnose(kc: Path, tmp: Path, topology: Path, name: str, *, ok: bool,
                        monkeypatch: pytest.MonkeyPatch) -> dict:
    """Launch TOPOLOGY into TMP/NAME (it succeeds or fails as OK says) and diagnose the run: its JSON document.
    Diagnosed in this process (`pdctl diagnose` is diagnose_run and printing; the CLI is tested with the Slurm
    runs): each pdctl process pays the kubernetes client's import, seconds on a loaded machine."""
    run_dir = tmp / name
    launched = run(kc, tmp, "launch", str(topology), "--detach", "--skip-compat", "--timeout", "120",
                   "--run-dir", str(run_dir))
    assert launched.returncode == (0 if ok else 1), launched.stderr[-3000:]
    monkeypatch.setenv("KUBECONFIG", str(kc))
    return diagnose_run(run_dir).to_json()


def test_a_healthy_run_and_an_image_that_cannot_be_pulled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with emulated_cluster(tmp_path) as kc:
        doc = launch_and_diagnose(kc, tmp_path, CONFIG, "healthy", ok=True, monkeypatch=monkeypatch)
        assert not doc["failed"] and doc["findings"] == [] and doc["checked"] == 3, doc
        bad = yaml.safe_load(CONFIG.read_text())  # beside the healthy run, in a namespace of its own
        bad["kubernetes"].update(image="registry.example.invalid/sglang:missing", namespace="bad-image")
        path = tmp_path / "bad-image.yaml"
        path.write_text(yaml.safe_dump(bad))
        doc = launch_and_diagnose(kc, tmp_path, path, "bad-image", ok=False, monkeypatch=monkeypatch)
    # (the runs' pods go with the emulator)
    assert doc["failed"] and doc["findings"], doc
    assert {f["signature"] for f in doc["findings"]} == {"kube-image-pull"}, doc["findings"]
    root = doc["findings"][0]
    assert "registry.example.invalid/sglang:missing" in root["line"] and "imagePullSecret" in root["fix"]


def test_a_crash_loop_named_with_its_logs_first_error_and_an_oomkill_named_as_the_kill(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """decode crashes (exit 1, its log's traceback), prefill is OOMKilled at its limit (no word in its log): both
    then wait in CrashLoopBackOff; the OOMKill is named for prefill, not the crash loop that follows it."""
    with emulated_cluster(tmp_path, crash=("decode",), oom=("prefill",)) as kc:
        doc = launch_and_diagnose(kc, tmp_path, CONFIG, "crash", ok=False, monkeypatch=monkeypatch)
    found = {f["process"]: f for f in doc["findings"]}
    assert doc["failed"] and len(doc["findings"]) == 2, doc["findings"]
    assert (found["decode-0"]["signature"], found["prefill-0"]["signature"]) == ("kube-crashloop", "kube-oomkilled")
    crash, oom = found["decode-0"], found["prefill-0"]
    assert "CrashLoopBackOff" in crash["line"] and "--previous" in crash["fix"]
    assert any("no CUDA-capable device" in line for line in crash["context"]), crash  # the container's own log
    assert "OOMKilled (exit code 137)" in oom["line"] and "memory limit" in oom["fix"]
