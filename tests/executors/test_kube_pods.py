"""What a pod's status tells diagnose (pdctl.executors.kube_pods.view, KubernetesExecutor.platform_lines): pure
parts, over API Pod objects as dicts. Read from a real API server (the emulator): tests/diagnose/test_e2e_kubernetes.py."""

from __future__ import annotations

import pytest

from pdctl.executors.kube_pods import view
from pdctl.executors.kubernetes import KubernetesExecutor


def test_a_pods_previous_container_end_is_read_beside_its_waiting_reason() -> None:
    pod = {"metadata": {"name": "pd-decode-0"}, "status": {"phase": "Running", "containerStatuses": [{
        "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}},
        "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]}}
    v = view(pod)
    assert (v.reason, v.last_end, v.exit_code) == ("CrashLoopBackOff", "OOMKilled (exit code 137)", 137)
    healthy = {"metadata": {"name": "p"}, "status": {"phase": "Running", "containerStatuses": [
        {"restartCount": 0, "state": {"running": {}}}]}}
    assert view(healthy).last_end is None and view(healthy).reason is None


def test_a_pod_says_its_previous_end_only_while_it_does_not_run_fine(monkeypatch: pytest.MonkeyPatch) -> None:
    """A container OOMKilled, now waiting in CrashLoopBackOff: the kill, then the wait; the same pod once its
    container serves again: nothing (a past restart of a pod that serves is no failure)."""
    last = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    looping = {"metadata": {"name": "pd-decode-0"}, "status": {"phase": "Running", "containerStatuses": [{
        "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}},
        "lastState": last}]}}
    serving = {"metadata": {"name": "pd-decode-0"}, "status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}], "containerStatuses": [
        {"restartCount": 3, "state": {"running": {}}, "lastState": last}]}}
    kube = KubernetesExecutor()
    monkeypatch.setattr(kube, "pod_view", lambda record: view(looping))
    assert kube.platform_lines({}) == ["pod pd-decode-0: previous container ended OOMKilled (exit code 137)",
                                       "pod pd-decode-0: CrashLoopBackOff back-off 10s"]
    monkeypatch.setattr(kube, "pod_view", lambda record: view(serving))
    assert kube.platform_lines({}) == []
