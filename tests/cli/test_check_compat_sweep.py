"""`pdctl check-compat` on a sweep, as a user runs it: the configs/ example with the example cluster profile,
one table row per variant, JSON `variants`, exit 1 when any variant fails and 0 when every one passes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import yaml

from tests.support.paths import CONFIGS_DIR, REPO

EXAMPLE = CONFIGS_DIR / "sweeps" / "gpt-oss-120b-gb300-sweep.yaml"
PROFILE = CONFIGS_DIR / "clusters" / "gb300-example.yaml"


def _pdctl(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pdctl", *args], check=False, capture_output=True, text=True,
                          timeout=300,
                          cwd=cwd, env={"PATH": "/usr/bin:/bin", "COLUMNS": "200"})


def test_the_example_sweep_is_judged_variant_by_variant(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    done = _pdctl("check-compat", str(EXAMPLE), "--cluster", str(PROFILE), "--json", str(out))
    assert done.returncode == 1, done.stderr
    doc = json.loads(out.read_text())
    assert [(v["name"], v["ok"]) for v in doc["variants"]] == [
        ("engine.version=0.5.8_decode.tp=1", True), ("engine.version=0.5.8_decode.tp=4", False),
        ("engine.version=0.5.23_decode.tp=1", True), ("engine.version=0.5.23_decode.tp=4", True)]
    assert doc["ok"] is False and set(doc["variants"][0]) >= {"name", "overrides", "ok", "findings"}
    for line in ("engine.version=0.5.8_decode.tp=4", "hetero-tp-swa-version", "FAIL"):
        assert line in done.stdout
    assert "1 of 4 variant(s) incompatible" in done.stderr
    assert "- engine.version=0.5.8_decode.tp=4: hetero-tp-swa-version" in done.stderr


def test_a_sweep_whose_variants_all_pass_exits_0(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["sweep"] = {"params": {"engine.version": ["0.5.23"], "decode.tp": [1, 4]}}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    (tmp_path / "pdctl-cluster.yaml").write_text(PROFILE.read_text())  # found in the working directory
    done = _pdctl("check-compat", str(path), "--json", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and [v["ok"] for v in report["variants"]] == [True, True]
    assert "every one of the 2 variants" in done.stderr


def test_a_cluster_profile_fills_in_the_single_topology(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    del doc["sweep"]
    doc["engine"]["version"] = "0.5.23"
    path = tmp_path / "one.yaml"
    path.write_text(yaml.safe_dump(doc))
    done = _pdctl("launch", str(path), "--dry-run", "--cluster", str(PROFILE), "--run-dir", str(tmp_path / "run"))
    assert done.returncode == 0, done.stderr
    for line in ("#SBATCH --account=llm-serving", "#SBATCH --partition=gb300", "#SBATCH --time=04:00:00",
                 "#SBATCH --comment=pdctl"):
        assert line in done.stdout
    # what each alias resolved to is said (stderr: the script on stdout stays runnable)
    for line in ("model.path = gpt-oss-120b -> /lustre/models/gpt-oss-120b",
                 "engine.container.image = sglang-0.5.8 -> lmsysorg/sglang:v0.5.8-cu130"):
        assert line in done.stderr and line not in done.stdout, done.stderr
    bad = _pdctl("launch", str(path), "--dry-run", "--cluster", str(tmp_path / "missing.yaml"))
    assert bad.returncode == 2 and "missing.yaml" in bad.stderr
