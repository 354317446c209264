"""Deterministic renders: every port comes from the topology or a documented derivation, so two dry runs of one
topology print and write the same bytes (local, container, Slurm), and the router's metrics endpoint is in the
plan for `pdctl status` to read."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import REPO, slurm_variant

CONFIG = REPO / "configs" / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"


def with_container(tmp: Path) -> Path:
    doc = yaml.safe_load(CONFIG.read_text())
    doc["engine"]["container"] = {"image": "lmsysorg/sglang:v0.5.4-cu129", "mounts": ["/shared/hf:/hf:ro"]}
    path = tmp / "container.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def render_twice(tmp: Path, config: Path, *extra: str) -> list[tuple[str, bytes, bytes]]:
    """Two renders into the same run dir: (stdout, plan.json, launch.sbatch or b'') each."""
    out = []
    for _ in range(2):
        run = tmp / "run"
        shutil.rmtree(run, ignore_errors=True)
        done = pdctl("launch", str(config), *extra, "--run-dir", str(run), cwd=tmp)
        assert done.returncode == 0, done.stderr
        script = run / "launch.sbatch"
        out.append((done.stdout, (run / "plan.json").read_bytes(), script.read_bytes() if script.exists() else b""))
    return out


@pytest.mark.parametrize("case", ["local", "container", "slurm-dry-run"])
def test_two_renders_are_byte_identical(tmp_path: Path, case: str) -> None:
    config = {"local": CONFIG, "container": with_container(tmp_path)}.get(case) or slurm_variant(CONFIG, tmp_path)
    first, second = render_twice(tmp_path, config, "--dry-run")
    assert first == second
    plan = json.loads(first[1])
    router = plan["router"]
    assert "--prometheus-port" in router["argv"] and router["metrics_url"] == plan["router_metrics_url"]
    port = router["argv"][router["argv"].index("--prometheus-port") + 1]
    assert port == "8001" and router["metrics_url"].endswith(":8001/metrics")  # router.port + 1
    if case == "slurm-dry-run":  # the dry run of a Slurm topology prints exactly the script --submit submits
        assert b"--in-allocation" in first[2] and first[0] == first[2].decode()


def test_metrics_port_from_the_topology(tmp_path: Path) -> None:
    doc = yaml.safe_load(CONFIG.read_text())
    doc["router"]["metrics_port"] = 9464
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = pdctl("launch", str(path), "--dry-run", "--json", "-", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    router = json.loads(done.stdout)["router"]
    assert router["metrics_url"] == "http://10.0.0.11:9464/metrics" and 9464 in router["ports"]
