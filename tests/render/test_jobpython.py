"""The interpreter a Slurm job runs pdctl with, chosen on its node by `uname -m` (pdctl.render.jobpython): the
script's lines run by bash with the node's architecture given by a `uname` first on PATH (a stand-in for the
node only; tests/launch/test_slurm_job.py runs the job on a real Slurm), down to a real venv built for an
architecture the submit host does not have, reused by the next job."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from pdctl.render.jobpython import Submitter, interpreter_lines
from pdctl.render.sbatch import render_sbatch
from tests.support.launch_samples import sglang_on_slurm
from tests.support.paths import REPO

PRINT = ["-c", "import sys, pdctl; print('RAN', sys.executable, pdctl.__file__)"]


def _node(tmp: Path, machine: str) -> dict[str, str]:
    """An environment whose `uname -m` says MACHINE."""
    bin_dir = tmp / f"bin-{machine}"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "uname").write_text(f"#!/bin/sh\n[ \"$1\" = -m ] && echo {machine} || exec /bin/uname \"$@\"\n")
    (bin_dir / "uname").chmod(0o755)
    site = next(Path(sys.prefix).glob("lib/python*/site-packages"))
    # the deps (pydantic, click...) from this venv; pdctl itself is what the job's venv installs
    return {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp), "PYTHONPATH": str(site)}


def _run(script: str, env: dict[str, str], tmp: Path) -> subprocess.CompletedProcess[str]:
    body = "\n".join(line for line in script.splitlines() if not line.startswith("#SBATCH"))
    return subprocess.run(["bash", "-c", body], check=False, env=env, cwd=tmp, capture_output=True, text=True,
                          timeout=600)


def test_job_python_per_architecture_and_the_submitters_own(tmp_path: Path) -> None:
    here = Submitter(sys.executable, "x86_64", str(REPO), "t")
    topo = sglang_on_slurm([None, None, None], {"job_python": {"aarch64": "/shared/arm/bin/python"}})
    lines = "\n".join(interpreter_lines(topo, here))
    assert "  aarch64) PDCTL_PYTHON=/shared/arm/bin/python ;;" in lines
    assert f"  x86_64) PDCTL_PYTHON={sys.executable} ;;" in lines
    one = sglang_on_slurm([None, None, None], {"job_python": "/opt/pdctl/bin/python"})
    assert "PDCTL_PYTHON=/opt/pdctl/bin/python  # slurm.job_python" in interpreter_lines(one, here)
    # the submitter's interpreter on a node of its architecture
    done = _run(render_sbatch(topo, tmp_path / "run", PRINT, here), _node(tmp_path, "x86_64"), tmp_path)
    assert done.returncode == 0 and f"RAN {sys.executable}" in done.stdout, done.stderr
    assert "is x86_64; pdctl runs with " + sys.executable in done.stderr


def test_a_node_of_another_architecture_builds_its_venv_once(tmp_path: Path) -> None:
    """The submit host says aarch64 (a Grace login node), the node is this machine's x86_64: no interpreter
    fits, so the job builds pdctl's venv from the submitter's checkout, then the next job reuses it."""
    base = getattr(sys, "_base_executable", sys.executable)
    topo = sglang_on_slurm([None, None, None], {
        "job_venv": str(tmp_path / "venvs"), "job_base_python": base,
        "job_pip_args": ["--no-index", "--no-deps", "--no-build-isolation"]})
    grace = Submitter("/shared/aarch64-venv/bin/python", "aarch64", str(REPO), "t")
    script = render_sbatch(topo, tmp_path / "run", PRINT, grace)
    env = _node(tmp_path, "x86_64")
    first = _run(script, env, tmp_path)
    venv = tmp_path / "venvs" / "pdctl-t-x86_64"
    assert first.returncode == 0, first.stderr[-3000:]
    assert "no pdctl interpreter for x86_64 (slurm.job_python); building" in first.stderr
    assert f"RAN {venv}/bin/python {venv}/lib/" in first.stdout  # pdctl imported from the built venv
    assert (venv / ".pdctl-ready").exists()
    again = _run(script, env, tmp_path)
    assert again.returncode == 0 and "building" not in again.stderr and f"RAN {venv}/bin/python" in again.stdout
    # a half-built venv (a job killed while building) is rebuilt, not used
    os.remove(venv / ".pdctl-ready")
    assert "building" in _run(script, env, tmp_path).stderr


def test_a_failed_build_fails_the_job(tmp_path: Path) -> None:
    topo = sglang_on_slurm([None, None, None], {"job_venv": str(tmp_path / "venvs"),
                                                "job_base_python": "/nonexistent/python3"})
    done = _run(render_sbatch(topo, tmp_path / "run", PRINT, Submitter("/x/python", "aarch64", "/x", "t")),
                _node(tmp_path, "x86_64"), tmp_path)
    assert done.returncode != 0 and "RAN" not in done.stdout and "/nonexistent/python3" in done.stderr
