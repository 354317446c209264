"""engine.container rendered for local/ssh nodes (`docker run`) and Slurm (pyxis), word by word, and what runs
inside stays the command check-compat judged."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
import yaml

from pdctl.compat import evaluate
from pdctl.errors import UserError
from pdctl.executors import node_executor
from pdctl.executors.ssh import SSHExecutor
from pdctl.models import resolve_model_spec
from pdctl.render.container import docker_image, docker_prefix, pyxis_image, pyxis_options
from pdctl.render.deployment import render
from pdctl.topology import load_topology_text
from tests.support.launch_samples import SGLANG_BASE

CONTAINER = {"image": "nvcr.io/nvidia/sglang:25.10-py3", "mounts": ["/shared/hf:/root/.cache/huggingface:ro"],
             "env": {"HF_HUB_OFFLINE": 1}, "workdir": "/workspace", "docker_args": ["--shm-size=32g"]}


def topology(container: dict | None = None, **over: object):
    doc = yaml.safe_load(SGLANG_BASE)
    doc["engine"]["container"] = container or CONTAINER
    doc["model"] = {"path": "/models/gpt-oss-120b", "preset": "gpt-oss-120b"}
    doc.update(over)
    return load_topology_text(yaml.safe_dump(doc))


def test_docker_run_on_a_gpu_node_with_rdma_word_by_word() -> None:
    topo = topology()
    assert docker_prefix(topo, topo.node("p0"), name="pdctl-variant-prefill-0") == [
        "docker", "run", "--rm", "--name", "pdctl-variant-prefill-0",
        "--init", "--network", "host", "--ipc", "host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "--gpus", "all",
        "--device", "/dev/infiniband", "--cap-add", "IPC_LOCK",
        "-v", "/shared/hf:/root/.cache/huggingface:ro",
        "-v", "/models/gpt-oss-120b:/models/gpt-oss-120b:ro",  # the local model dir, at the path servers get
        "-e", "HF_HUB_OFFLINE=1",
        "-w", "/workspace",
        "--shm-size=32g",
        "nvcr.io/nvidia/sglang:25.10-py3",
    ]


def test_docker_run_on_a_cpu_node_over_tcp_talking_over_stdin() -> None:
    doc = yaml.safe_load(SGLANG_BASE)
    topo = topology({"image": "lmsysorg/sglang:v0.5.4", "mounts": {"/models": "/models"}},
                    transfer={**doc["transfer"], "protocol": "tcp"},
                    nodes=[{**n, "gpu": "cpu"} for n in doc["nodes"]])
    assert docker_prefix(topo, topo.node("d0"), interactive=True) == [
        "docker", "run", "--rm", "-i",
        "--init", "--network", "host", "--ipc", "host", "--ulimit", "memlock=-1", "--ulimit", "stack=67108864",
        "-v", "/models:/models",  # covers the model dir: no second mount
        "lmsysorg/sglang:v0.5.4",
    ]


def test_pyxis_options_word_by_word() -> None:
    assert pyxis_options(topology()) == [
        "--container-image=nvcr.io#nvidia/sglang:25.10-py3", "--container-name=pdctl-" + topology().name,
        "--no-container-entrypoint", "--no-container-mount-home",
        "--container-mounts=/shared/hf:/root/.cache/huggingface:ro,/models/gpt-oss-120b:/models/gpt-oss-120b:ro",
        "--container-workdir=/workspace",
    ]
    assert pyxis_options(load_topology_text(SGLANG_BASE)) == []


@pytest.mark.parametrize(("image", "docker", "pyxis"), [
    ("lmsysorg/sglang:v0.5.4", "lmsysorg/sglang:v0.5.4", "lmsysorg/sglang:v0.5.4"),
    ("ubuntu", "ubuntu", "ubuntu"),
    ("nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io#nvidia/pytorch:25.01-py3"),
    ("nvcr.io#nvidia/pytorch:25.01-py3", "nvcr.io/nvidia/pytorch:25.01-py3", "nvcr.io#nvidia/pytorch:25.01-py3"),
    ("localhost/sglang:dev", "localhost/sglang:dev", "localhost#sglang:dev"),
    ("registry:5000/sglang:dev", "registry:5000/sglang:dev", "registry:5000#sglang:dev"),
    ("/shared/containers/sglang.sqsh", None, "/shared/containers/sglang.sqsh"),
])
def test_image_names_for_docker_and_enroot(image: str, docker: str | None, pyxis: str) -> None:
    assert pyxis_image(image) == pyxis
    if docker is None:
        with pytest.raises(UserError, match="docker .* cannot run it"):
            docker_image(image)
    else:
        assert docker_image(image) == docker


def test_every_process_runs_in_the_container_and_inside_is_the_judged_command() -> None:
    topo = topology()
    plan = render(topo)
    for proc in plan.processes():  # check-compat parses proc.argv and proc.env: the wrapper is apart
        assert proc.container == f"pdctl-variant-{proc.name}" and proc.wrap[-1] == "nvcr.io/nvidia/sglang:25.10-py3"
        words = shlex.split(proc.command)
        image_at = words.index("nvcr.io/nvidia/sglang:25.10-py3")
        inside = words[image_at + 1:]
        env = [f"{k}={v}" for k, v in proc.env.items()]
        assert inside == (["env", *env] if env else []) + proc.argv  # env inside the container, not on docker
    assert plan.router.argv[0] == "/opt/venv/bin/python"  # engine.python in the image, never this interpreter
    spec = resolve_model_spec(topo.model)
    bare_topo = topo.model_copy(update={"engine": topo.engine.model_copy(update={"container": None})})
    assert evaluate(render(topo), spec) == evaluate(render(bare_topo), spec)  # the container changes no verdict


def test_probes_and_version_questions_run_in_the_same_container() -> None:
    topo = topology()
    local = node_executor(topo.node("p0"), topo=topo)
    assert local.wrap is not None and local.wrap(False) == docker_prefix(topo, topo.node("p0"))
    assert local.wrap(True) == docker_prefix(topo, topo.node("p0"), interactive=True)
    ssh = SSHExecutor("10.0.0.11", {}, wrap=local.wrap)
    remote = ssh._remote(["python3", "-c", "print(1)"], {"A": "1"}, interactive=False)
    assert shlex.split(remote) == [*docker_prefix(topo, topo.node("p0")), "env", "A=1", "python3", "-c", "print(1)"]
    assert node_executor(load_topology_text(SGLANG_BASE).node("p0")).wrap is None  # no container: as is


def test_a_squashfs_image_on_ssh_nodes_is_bad_input(tmp_path: Path) -> None:
    from tests.support.launch_e2e import pdctl

    doc = yaml.safe_load(SGLANG_BASE)
    doc["engine"]["container"] = {"image": "/shared/sglang.sqsh"}
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    done = pdctl("launch", str(path), "--dry-run", "--skip-compat", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2 and "enroot image file" in done.stderr
