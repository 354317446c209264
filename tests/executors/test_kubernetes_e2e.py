"""The kubernetes executor through the official client against the API emulator (tests/support/kube_cluster.py,
its own process): launch applies and waits for readiness, status reads the pods, logs reads the pod log,
down deletes exactly what was created; an image that cannot be pulled and a crash-looping container fail the
launch with the pod's own reason. SGLang's own parser (0.5.23, the side venv) reads every pod's command.
Issue 20's run records hold on Kubernetes too: --set overrides are kept (topology.yaml, state.json) and
applied, a dry run never writes over a run's records, `pdctl runs` lists the run, and eval refuses up front
when a pod of the run crash-loops (pdctl.liveness), naming the pod with its log tail."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.support.kube import emulated_cluster
from tests.support.paths import CONFIGS_DIR, DATA

pytestmark = pytest.mark.e2e
CONFIG = CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-k8s.yaml"


def run(kubeconfig: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "pdctl", *args], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def foreign_objects(kubeconfig: Path, applied: list[dict], create: bool = True) -> list[str]:
    """A ConfigMap and a Service pdctl did not create, in the namespace of the run's objects and with the run's
    labels (created, or only looked up), through the official client: their names, as they exist."""
    from kubernetes import client, config

    api = client.CoreV1Api(config.new_client_from_config(str(kubeconfig)))
    namespace = applied[0]["metadata"]["namespace"]
    meta = client.V1ObjectMeta(name="not-pdctls", namespace=namespace, labels=applied[0]["metadata"]["labels"])
    if create:
        api.create_namespaced_config_map(namespace, client.V1ConfigMap(api_version="v1", kind="ConfigMap",
                                                                       metadata=meta, data={"owner": "someone"}))
        api.create_namespaced_service(namespace, client.V1Service(
            api_version="v1", kind="Service", metadata=meta,
            spec=client.V1ServiceSpec(ports=[client.V1ServicePort(port=80)])))
    def names(listed) -> list[str]:  # raw JSON: the emulator's own objects are not all the client's models
        return [o["metadata"]["name"] for o in json.loads(listed.data)["items"]]

    return ([f"ConfigMap/{n}" for n in names(api.list_namespaced_config_map(namespace, _preload_content=False))]
            + [f"Service/{n}" for n in names(api.list_namespaced_service(namespace, _preload_content=False))
               if n == "not-pdctls"])


def topology(tmp: Path, **kube: object) -> Path:
    doc = yaml.safe_load(CONFIG.read_text())
    doc["kubernetes"].update(kube)
    path = tmp / "k8s.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def test_launch_status_logs_down(tmp_path: Path, oracle) -> None:
    with emulated_cluster(tmp_path) as kc:
        launched = run(kc, tmp_path, "launch", str(CONFIG), "--detach", "--timeout", "120", "--json", "-",
                       "--set", "kubernetes.labels.team=inference")
        assert launched.returncode == 0, launched.stderr
        state = json.loads(launched.stdout)
        assert state["status"] == "running" and state["executor"] == "kubernetes"
        assert state["overrides"] == ["kubernetes.labels.team=inference"]
        run_dir = Path(state["run_dir"])
        assert "with --set kubernetes.labels.team=inference" in (run_dir / "topology.yaml").read_text()
        applied = list(yaml.safe_load_all((run_dir / "manifests.yaml").read_text()))
        assert all(o["metadata"]["labels"]["team"] == "inference" for o in applied)
        lock = json.loads((run_dir / "lock.json").read_text())  # issue 27's record of what was launched
        assert lock["preflight"].startswith("not run") and lock["executor"] == "kubernetes"
        assert lock["topology"]["overrides"] == ["kubernetes.labels.team=inference"]
        records = (run_dir / "state.json").read_text()
        dry = run(kc, tmp_path, "launch", str(CONFIG), "--dry-run", "--run-dir", str(run_dir))
        assert dry.returncode == 0 and (run_dir / "dry-run" / "manifests.yaml").exists(), dry.stderr
        assert (run_dir / "state.json").read_text() == records  # the run's records untouched
        listed = json.loads(run(kc, tmp_path, "runs", "--json", "-").stdout)["runs"]
        assert [(r["name"], r["state"]) for r in listed] == [(state["topology"], "running")], listed
        assert [o["kind"] for o in state["objects"]] == ["LeaderWorkerSet", "LeaderWorkerSet", "Service", "Service",
                                                         "Deployment", "Service"]
        status = run(kc, tmp_path, "status", "--json", "-")
        doc = json.loads(status.stdout)
        assert status.returncode in (0, 1), status.stderr
        assert all(p["healthy"] and p["pod"] for p in doc["processes"]), doc["processes"]
        assert doc["router"]["pod"] and doc["router"]["restarts"] == 0
        table = run(kc, tmp_path, "status")  # the human table: pods, and a detail column never squeezed out
        assert table.returncode == status.returncode and "detail" in table.stdout and "restarts" in table.stdout
        assert table.stdout.count("yes") == 3, table.stdout
        logs = run(kc, tmp_path, "logs", "decode", "--tail", "50")
        assert logs.returncode == 0 and "ready to roll" in logs.stdout, logs.stderr
        command = next(line[2:] for line in logs.stdout.splitlines() if line.startswith("+ "))
        parsed = oracle.ask("parse", [shlex.split(command)[3:]])[0]  # SGLang's own parser on the pod's command
        assert "error" not in parsed, parsed
        assert parsed["values"]["tp_size"] == 4 and parsed["values"]["disaggregation_mode"] == "decode"
        foreign = foreign_objects(kc, applied)  # in the run's namespace, labelled like the run: not the run's
        assert foreign == ["ConfigMap/not-pdctls", "Service/not-pdctls"], foreign
        down = run(kc, tmp_path, "down")
        assert down.returncode == 0 and "deleted" in down.stdout, down.stderr
        assert foreign_objects(kc, applied, create=False) == foreign  # down deleted what it created, nothing else
        after = run(kc, tmp_path, "status", "--json", "-")
        assert not any(p.get("pod") and p["healthy"] for p in json.loads(after.stdout)["processes"])


def test_image_pull_error_fails_with_the_pods_reason(tmp_path: Path) -> None:
    with emulated_cluster(tmp_path) as kc:
        path = topology(tmp_path, image="registry.example.invalid/sglang:missing")
        launched = run(kc, tmp_path, "launch", str(path), "--detach", "--timeout", "120")
        assert launched.returncode == 1, launched.stderr
        assert "ErrImagePull" in launched.stderr or "ImagePullBackOff" in launched.stderr, launched.stderr
        assert "Traceback" not in launched.stderr
        assert run(kc, tmp_path, "down").returncode == 0


def test_crash_loop_fails_with_reason_and_log_tail(tmp_path: Path) -> None:
    with emulated_cluster(tmp_path, crash=("decode",)) as kc:
        launched = run(kc, tmp_path, "launch", str(CONFIG), "--detach", "--timeout", "120")
        assert launched.returncode == 1, launched.stderr
        assert "decode-0" in launched.stderr and "CrashLoopBackOff" in launched.stderr, launched.stderr
        assert "no CUDA-capable device" in launched.stderr  # the container's own log tail
        evaluated = run(kc, tmp_path, "eval", "gsm8k", "--data-file", str(DATA / "gsm8k_test_50.jsonl"),
                        "--num-questions", "1")
        flat = " ".join(evaluated.stderr.split())
        assert evaluated.returncode == 1 and 'File "' not in flat, flat  # pdctl's message; the Traceback is the pod's
        assert "has a dead process: decode:0 (decode-0, node d0, pod gpt-oss-120b-p1-d4-gb300-k8s-decode-0)" in flat
        assert "no CUDA-capable device" in flat
        assert run(kc, tmp_path, "down").returncode == 0
