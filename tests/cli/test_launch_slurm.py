"""`pdctl launch`'s Slurm options as a user meets them: wrong combinations and --in-allocation outside an
allocation are bad input (exit 2, nothing written); a topology with a slurm: section renders its sbatch script
without --executor."""

from __future__ import annotations

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


def test_a_slurm_section_renders_the_script_without_executor(tmp_path: Path) -> None:
    done = pdctl("launch", str(slurm_variant(CONFIG, tmp_path)), "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    script = (tmp_path / "run" / "launch.sbatch").read_text()
    assert "#SBATCH --partition=gpu" in script and "#SBATCH --time=01:00:00" in script
    assert "#SBATCH --gpus-per-node=4" in script  # the nodes' gpus, asked for
    assert (tmp_path / "run" / "topology.yaml").is_file()  # what the job launches


def test_preflight_of_nodes_a_job_assigns_needs_an_allocation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    done = pdctl("preflight", str(slurm_variant(CONFIG, tmp_path)), cwd=tmp_path)
    assert done.returncode == 2 and "run this inside an allocation (salloc)" in " ".join(done.stderr.split())
