"""`pdctl launch`'s Slurm options as a user meets them: wrong combinations and --in-allocation outside an
allocation are bad input (exit 2, nothing written); a topology with a slurm: section is launched as a job (a
plain launch submits it, as --submit does) and --dry-run prints exactly the sbatch script it would submit."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import REPO, slurm_variant

CONFIG = REPO / "configs" / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"


@pytest.mark.parametrize(("extra", "slurm", "message"), [
    (["--in-allocation"], True, "SLURM_JOB_ID is not set"),
    (["--in-allocation", "--dry-run"], True, "takes no --dry-run or --submit"),
    (["--submit"], False, "--submit applies to Slurm"),
])
def test_slurm_options_misused_are_bad_input(tmp_path: Path, extra: list[str], slurm: bool, message: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    config = slurm_variant(CONFIG, tmp_path) if slurm else CONFIG
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)  # the tests may run inside an allocation themselves
    done = pdctl("launch", str(config), *extra, "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 2 and message in " ".join(done.stderr.split()), done.stderr
    assert not (tmp_path / "run").exists()


def test_a_slurm_section_dry_run_prints_the_script_without_executor(tmp_path: Path) -> None:
    done = pdctl("launch", str(slurm_variant(CONFIG, tmp_path)), "--dry-run", "--run-dir", str(tmp_path / "run"),
                 cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = (tmp_path / "run" / "launch.sbatch").read_text()
    assert done.stdout == script  # what --submit submits, exactly (README: "the sbatch script")
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --time=01:00:00" in script
    assert "#SBATCH --gpus-per-node=4" in script  # the nodes' gpus, asked for
    assert "srun --nodes" not in done.stdout  # the steps the job starts are in plan.json, not mixed into the script
    assert json.loads((tmp_path / "run" / "plan.json").read_text())["router"]["command"].startswith("srun ")


def test_a_plain_launch_of_a_slurm_topology_submits_it(tmp_path: Path) -> None:
    """It used to render the script and exit 0 without launching anything."""
    env = {**os.environ, "PATH": str(Path(sys.executable).parent)}  # no sbatch here: the submission is refused
    done = subprocess.run([sys.executable, "-m", "pdctl", "launch", str(slurm_variant(CONFIG, tmp_path)),
                           "--run-dir", str(tmp_path / "run")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120, check=False)
    assert done.returncode == 2, done.stderr
    assert "a Slurm launch submits its job with sbatch, which is not on PATH" in " ".join(done.stderr.split())
    assert (tmp_path / "run" / "topology.yaml").is_file()  # what the job would have launched


def test_paths_the_job_needs_on_a_node_local_filesystem_are_warned(tmp_path: Path) -> None:
    shm = Path(tempfile.mkdtemp(prefix="pdctl-test-", dir="/dev/shm"))  # tmpfs: one machine's memory
    try:
        done = pdctl("launch", str(slurm_variant(CONFIG, tmp_path)), "--dry-run", "--run-dir", str(shm / "run"),
                     cwd=tmp_path)
    finally:
        shutil.rmtree(shm, ignore_errors=True)
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stderr.split())
    assert "warning: the Slurm job reads and writes these on its nodes" in flat
    assert f"run dir (--run-dir: script, job output, state, logs) {shm / 'run'} is on tmpfs (/dev/shm)" in flat


def test_preflight_of_nodes_a_job_assigns_needs_an_allocation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    done = pdctl("preflight", str(slurm_variant(CONFIG, tmp_path)), cwd=tmp_path)
    assert done.returncode == 2 and "run this inside an allocation (salloc)" in " ".join(done.stderr.split())
