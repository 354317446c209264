"""`pdctl launch` of a sweep: check-compat judges every variant before anything is launched; --keep-going
launches the valid ones, one run dir per variant (<run-dir>/<variant>); `pdctl runs` lists them."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import pytest
import yaml

from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import local_cpu
from tests.support.net import free_port
from tests.support.paths import CONFIGS_DIR

EXAMPLE = CONFIGS_DIR / "sweeps" / "gpt-oss-120b-gb300-sweep.yaml"
PROFILE = CONFIGS_DIR / "clusters" / "gb300-example.yaml"
VARIANTS = ["engine.version=0.5.8_decode.tp=1", "engine.version=0.5.8_decode.tp=4",
            "engine.version=0.5.23_decode.tp=1", "engine.version=0.5.23_decode.tp=4"]


def test_a_failing_variant_stops_the_sweep_before_anything_is_launched(tmp_path: Path) -> None:
    run = tmp_path / "sweep"
    done = pdctl("launch", str(EXAMPLE), "--cluster", str(PROFILE), "--dry-run", "--run-dir", str(run), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    assert "1 of 4 variant(s) fail check-compat; nothing was launched" in done.stderr
    assert "- engine.version=0.5.8_decode.tp=4: hetero-tp-swa-version" in done.stderr
    assert not run.exists()


def test_keep_going_renders_one_job_per_valid_variant(tmp_path: Path) -> None:
    run = tmp_path / "sweep"
    done = pdctl("launch", str(EXAMPLE), "--cluster", str(PROFILE), "--dry-run", "--keep-going", "--run-dir",
                 str(run), "--json", "-", cwd=tmp_path)
    assert done.returncode == 1, done.stderr  # one variant did not run
    doc = json.loads(done.stdout)
    assert [(v["name"], v["outcome"]) for v in doc["variants"]] == [
        (VARIANTS[0], "dry-run"), (VARIANTS[1], "skipped"), (VARIANTS[2], "dry-run"), (VARIANTS[3], "dry-run")]
    assert doc["variants"][1]["failed_rules"] == ["hetero-tp-swa-version"]
    for name in (VARIANTS[0], VARIANTS[2], VARIANTS[3]):
        script = (run / name / "launch.sbatch").read_text()
        assert f"--run-dir {run / name}" in script and "#SBATCH --account=llm-serving" in script
    assert not (run / VARIANTS[1]).exists()
    assert "1 of 4 variant(s) did not run: engine.version=0.5.8_decode.tp=4" in done.stderr


def test_a_foreground_sweep_needs_detach(tmp_path: Path) -> None:
    done = pdctl("launch", str(EXAMPLE), "--cluster", str(PROFILE), "--run-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 2 and "add --detach" in done.stderr


@pytest.mark.e2e
def test_a_local_sweep_runs_each_variant_and_runs_lists_them(tmp_path: Path, ref_checkpoint: Path) -> None:
    """Two variants of the reference engine on this machine (their ports zipped), launched detached."""
    path = local_cpu(tmp_path, ref_checkpoint, name="sweep-local")
    doc = yaml.safe_load(path.read_text())
    keys = ("prefill.port", "decode.port", "router.port", "router.metrics_port", "transfer.bootstrap_port")
    doc["sweep"] = {"params": {k: [free_port(), free_port()] for k in keys}, "zip": True}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = pdctl("launch", str(path), "--detach", "--json", "-", cwd=tmp_path, timeout=900)
    try:
        assert done.returncode == 0, done.stderr[-4000:]
        variants = json.loads(done.stdout)["variants"]
        assert [v["outcome"] for v in variants] == ["running", "running"]
        listed = pdctl("runs", "--json", "-", cwd=tmp_path)
        rows = {r["name"]: r for r in json.loads(listed.stdout)["runs"]}
        for v in variants:
            row = rows[f"sweep-local/{v['name']}"]
            where = (tmp_path / ".pdctl" / "runs" / "sweep-local" / v["name"]).resolve()
            assert row["state"] == "running" and Path(row["run_dir"]) == where
            assert json.loads((where / "state.json").read_text())["variant"]["name"] == v["name"]
            lock = json.loads((where / "lock.json").read_text())  # what ran, with what preflight saw
            assert lock["preflight"] == "passed" and lock["topology"]["variant"]["name"] == v["name"]
            assert lock["nodes"]["local"]["machine"] == platform.machine() and lock["nodes"]["local"]["packages"]
        a, b = (str(tmp_path / v["run_dir"]) for v in variants)
        diff = pdctl("diff", a, b, "--json", "-", cwd=tmp_path)
        assert diff.returncode == 1, diff.stderr
        keys = {row["key"] for row in json.loads(diff.stdout)["differences"]}
        assert {"topology: prefill.port", "topology: router.port", "topology.sha256"} <= keys
        assert not any(k.startswith("nodes.") for k in keys)  # the same node, the same facts
        same = pdctl("diff", a, a, cwd=tmp_path)
        assert same.returncode == 0 and "same" in same.stdout
    finally:
        for v in json.loads(done.stdout or '{"variants": []}').get("variants", []):
            pdctl("down", "--run-dir", str(tmp_path / v["run_dir"]), cwd=tmp_path, timeout=180)
