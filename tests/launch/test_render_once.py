"""One launch renders once: `pdctl launch` run in this process — a real launch of the local CPU topology
(reference engine prefill TP2 -> decode TP1 over NIXL, the real sglang-router, preflight with its real
transfer test), a dry run, a Slurm dry run (the sbatch script) and a Slurm submission — while every call of the render, the placement, the version
question, the verdict, check-compat's parse and preflight is counted by its code object (so however a module
imports them, every call is seen). Before the redesign a local launch rendered 3 times and placed 12 times."""

from __future__ import annotations

import sys
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from pdctl.cli.main import run
from pdctl.compat.effective import effective
from pdctl.launch.deploy import launch
from pdctl.launch.gate import engine_version, gate
from pdctl.launch.shutdown import teardown
from pdctl.preflight.runner import run_preflight
from pdctl.render.deployment import render
from pdctl.topology.placement import place
from tests.support.launch_samples import local_cpu, slurm_variant

COUNTED = {f.__code__: f.__name__ for f in (launch, engine_version, place, render, gate, effective, run_preflight)}


@contextmanager
def counting() -> Iterator[Counter]:
    """Count the calls of COUNTED in every thread while the block runs."""
    counts: Counter = Counter()
    lock = threading.Lock()

    def profile(frame, event, arg):  # sys.setprofile calls it with (frame, event, arg)
        if event == "call" and frame.f_code in COUNTED:
            with lock:
                counts[COUNTED[frame.f_code]] += 1

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]


ONCE = {"launch": 1, "engine_version": 1, "place": 1, "render": 1, "gate": 1, "effective": 1}


@pytest.mark.e2e
def test_a_real_launch_renders_and_places_once(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = local_cpu(tmp_path, ref_checkpoint, name="render-once")
    run_dir = tmp_path / "run"
    try:
        with counting() as counts:
            code = run(["launch", str(topo), "--detach", "--timeout", "180", "--run-dir", str(run_dir)])
        assert code == 0
        assert dict(counts) == {**ONCE, "run_preflight": 1}  # preflight reads the one deployment
    finally:
        if (run_dir / "state.json").exists():
            teardown(run_dir, grace_s=5)


def test_a_dry_run_renders_once(tmp_path: Path, ref_checkpoint: Path) -> None:
    topo = local_cpu(tmp_path, ref_checkpoint, name="render-once-dry")
    with counting() as counts:
        code = run(["launch", str(topo), "--dry-run", "--run-dir", str(tmp_path / "run")])
    assert code == 0 and (tmp_path / "run" / "plan.json").is_file()
    assert dict(counts) == ONCE


def test_a_slurm_dry_run_renders_once(tmp_path: Path, ref_checkpoint: Path, capsys: pytest.CaptureFixture) -> None:
    """The dry run of a Slurm topology: its deployment (srun steps) and the sbatch script --submit submits."""
    topo = slurm_variant(local_cpu(tmp_path, ref_checkpoint, name="render-once-slurm"), tmp_path)
    with counting() as counts:
        code = run(["launch", str(topo), "--dry-run", "--run-dir", str(tmp_path / "run")])
    assert code == 0 and (tmp_path / "run" / "launch.sbatch").is_file()
    assert capsys.readouterr().out == (tmp_path / "run" / "launch.sbatch").read_text()
    assert dict(counts) == ONCE


def test_a_slurm_submission_renders_once(tmp_path: Path, ref_checkpoint: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A plain launch of a Slurm topology submits its job: rendered once, the job's files written, then sbatch
    (not on PATH here: refused, exit 2, so nothing is submitted to a real cluster)."""
    topo = slurm_variant(local_cpu(tmp_path, ref_checkpoint, name="render-once-submit"), tmp_path)
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))
    with counting() as counts:
        code = run(["launch", str(topo), "--run-dir", str(tmp_path / "run")])
    assert code == 2 and (tmp_path / "run" / "launch.sbatch").is_file()
    assert (tmp_path / "run" / "topology.yaml").is_file() and (tmp_path / "run" / "plan.json").is_file()
    assert dict(counts) == ONCE
