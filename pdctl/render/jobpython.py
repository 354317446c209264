"""The interpreter that runs pdctl inside a Slurm job, chosen on the job's node by its architecture.

The login host that submits a job is often x86_64 while GB200/GB300 compute trays are aarch64 (Grace): the
submitting venv's interpreter cannot run there. So the job script picks its interpreter by `uname -m` of the
node it runs on: `slurm.job_python` (one path, or one per architecture), else the submitting interpreter when
the node has the submit host's architecture, else a venv built in the job for that architecture — once per
architecture and pdctl build, under `flock` in `slurm.job_venv` on a shared filesystem, with `uv` when the node
has it, else `python -m venv` + pip (srtctl's job template likewise builds its compute-architecture venv with
uv under flock on the head node). The lines are a pure function of the topology and the `Submitter`.
"""

from __future__ import annotations

import hashlib
import platform
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pdctl

if TYPE_CHECKING:
    from pdctl.topology import Topology

READY_MARK = ".pdctl-ready"  # written last into a built venv: a half-built one (a killed job) is rebuilt
INTERPRETER_VAR = "PDCTL_PYTHON"
JOB_LINE = "pdctl job:"  # the job's line naming its node's architecture and interpreter (in slurm-<job>.out)


@dataclass(frozen=True)
class Submitter:
    """The submitting pdctl: its interpreter, the architecture it runs on (`uname -m`), what installs the same
    pdctl elsewhere (its source checkout, else `pdctl==VERSION`) and a tag naming that build (venvs of another
    build are not reused)."""

    python: str
    machine: str
    install: str
    tag: str

    @classmethod
    def here(cls) -> Submitter:
        root = Path(pdctl.__file__).resolve().parent.parent
        if (root / "pyproject.toml").is_file():
            digest = hashlib.sha256()
            for path in sorted((root / "pdctl").rglob("*")):
                if path.is_file() and "__pycache__" not in path.parts:
                    stat = path.stat()
                    digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
            return cls(sys.executable, platform.machine(), str(root), f"{pdctl.__version__}-{digest.hexdigest()[:10]}")
        return cls(sys.executable, platform.machine(), f"pdctl=={pdctl.__version__}", pdctl.__version__)


def _home(path: str) -> str:
    """A path for a double-quoted shell word: ~/x as $HOME/x (a quoted ~ is not expanded)."""
    if path == "~" or path.startswith("~/"):
        return "$HOME" + path[1:]
    return path


def _build_lines(topo: Topology, sub: Submitter) -> list[str]:
    slurm = topo.slurm
    assert slurm is not None
    base = shlex.quote(slurm.job_base_python)
    pip = " ".join(shlex.quote(a) for a in [*slurm.job_pip_args, sub.install])
    venvs = f'"{_home(slurm.job_venv)}"'
    return [
        f"venvs={venvs}",
        f'venv="$venvs/pdctl-{sub.tag}-$arch"',
        'mkdir -p "$venvs"',
        f'exec 9>"$venvs/.lock-pdctl-{sub.tag}-$arch"',
        "flock 9",
        f'if [ ! -e "$venv/{READY_MARK}" ]; then',
        f'  echo "{JOB_LINE} no pdctl interpreter for $arch (slurm.job_python); building $venv" >&2',
        '  rm -rf "$venv"',
        "  if command -v uv >/dev/null 2>&1; then",
        f'    uv venv -q --python {base} "$venv"',
        f'    uv pip install -q --python "$venv/bin/python" {pip}',
        "  else",
        f'    {base} -m venv "$venv"',
        f'    "$venv/bin/python" -m pip install -q {pip}',
        "  fi",
        f'  touch "$venv/{READY_MARK}"',
        "fi",
        "flock -u 9",
        "exec 9>&-",
        f'{INTERPRETER_VAR}="$venv/bin/python"',
    ]


def interpreter_lines(topo: Topology, sub: Submitter) -> list[str]:
    """Shell lines that set $PDCTL_PYTHON on the job's node and say which (see the module docstring)."""
    chosen = topo.slurm.job_python if topo.slurm is not None else None
    lines = ["arch=$(uname -m)"]
    if isinstance(chosen, str):
        lines.append(f"{INTERPRETER_VAR}={shlex.quote(chosen)}  # slurm.job_python")
    else:
        table = {sub.machine: sub.python, **(chosen or {})}
        lines.append('case "$arch" in')
        for arch, python in table.items():
            lines.append(f"  {arch}) {INTERPRETER_VAR}={shlex.quote(python)} ;;")
        if topo.slurm is not None:
            lines.append("  *)")
            lines += ["    " + line for line in _build_lines(topo, sub)]
            lines.append("    ;;")
        else:
            lines.append(f'  *) echo "{JOB_LINE} no pdctl interpreter for $arch (set slurm.job_python)" >&2; exit 2 ;;')
        lines.append("esac")
    lines.append(f'echo "{JOB_LINE} $(hostname) is $arch; pdctl runs with ${INTERPRETER_VAR}" >&2')
    return lines
