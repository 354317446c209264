"""The sbatch script line by line: #SBATCH lines from the slurm: section, nodes by count and by name, and the
job's one command (pdctl launch --in-allocation on the run dir's copy of the topology); bash accepts it; two
renders are identical."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.launch.submit import pdctl_command
from pdctl.render.jobpython import Submitter
from pdctl.render.sbatch import job_nodes, render_sbatch
from tests.support.launch_samples import sglang_on_slurm

FULL = {"partition": "gpu", "account": "llm", "qos": "high", "time_limit": "1-00:00:00", "reservation": "pd-tests",
        "constraint": "h100", "gres": "gpu:8", "job_name": "gpt-oss-pd",
        "sbatch_directives": {"mail-type": "END,FAIL", "comment": "PD run 7", "requeue": True, "hold": False}}


def topology(slurm: dict, hosts: list[str | None]):
    return sglang_on_slurm(hosts, slurm)


SUBMITTER = Submitter(python="/shared/venv/bin/python", machine="x86_64", install="/shared/pdctl", tag="0.1.0-t")


def script_of(topo, run: Path, *, timeout: float = 600, skip_preflight: bool = False,
              submitter: Submitter = SUBMITTER) -> str:
    """The script of TOPO for RUN with the job's command as `pdctl launch --submit` writes it."""
    return render_sbatch(topo, run, pdctl_command(run, timeout=timeout, skip_compat=False,
                                                  skip_preflight=skip_preflight), submitter)


def test_the_script_line_by_line(tmp_path: Path) -> None:
    run = tmp_path / "run"
    script = script_of(topology(FULL, [None, None, None]), run, timeout=300, skip_preflight=True)
    assert script.splitlines() == [
        "#!/bin/bash",
        "#SBATCH --job-name=gpt-oss-pd",
        "#SBATCH --nodes=3",
        "#SBATCH --partition=gpu",
        "#SBATCH --account=llm",
        "#SBATCH --qos=high",
        "#SBATCH --time=1-00:00:00",
        "#SBATCH --reservation=pd-tests",
        "#SBATCH --constraint=h100",
        "#SBATCH --gres=gpu:8",
        "#SBATCH --exclusive",
        f"#SBATCH --output={run}/slurm-%j.out",
        f"#SBATCH --chdir={tmp_path}",  # the directory pdctl ran in: relative model paths mean the same
        "#SBATCH --mail-type=END,FAIL",
        '#SBATCH --comment="PD run 7"',
        "#SBATCH --requeue",
        "# rendered by pdctl for topology variant",
        "# The job runs `pdctl launch --in-allocation` on its first node, which assigns the job's nodes to the",
        '# topology\'s in order (scontrol show hostnames "$SLURM_JOB_NODELIST"), asks them for their SGLang',
        "# version, runs check-compat and preflight on them, then starts every process as an srun step and",
        "# stays until the job is cancelled (pdctl down).",
        "set -euo pipefail",
        "export PDCTL_OWN_JOB=1",
        "arch=$(uname -m)",
        'case "$arch" in',
        "  x86_64) PDCTL_PYTHON=/shared/venv/bin/python ;;",
        "  *)",
        '    venvs="$HOME/.cache/pdctl/venvs"',
        '    venv="$venvs/pdctl-0.1.0-t-$arch"',
        '    mkdir -p "$venvs"',
        '    exec 9>"$venvs/.lock-pdctl-0.1.0-t-$arch"',
        "    flock 9",
        '    if [ ! -e "$venv/.pdctl-ready" ]; then',
        '      echo "pdctl job: no pdctl interpreter for $arch (slurm.job_python); building $venv" >&2',
        '      rm -rf "$venv"',
        "      if command -v uv >/dev/null 2>&1; then",
        '        uv venv -q --python python3 "$venv"',
        '        uv pip install -q --python "$venv/bin/python" /shared/pdctl',
        "      else",
        '        python3 -m venv "$venv"',
        '        "$venv/bin/python" -m pip install -q /shared/pdctl',
        "      fi",
        '      touch "$venv/.pdctl-ready"',
        "    fi",
        "    flock -u 9",
        "    exec 9>&-",
        '    PDCTL_PYTHON="$venv/bin/python"',
        "    ;;",
        "esac",
        'echo "pdctl job: $(hostname) is $arch; pdctl runs with $PDCTL_PYTHON" >&2',
        (f'exec "$PDCTL_PYTHON" -m pdctl launch {run}/topology.yaml --in-allocation --cluster none --run-dir {run} '
         "--timeout 300 --skip-preflight"),
    ]
    if shutil.which("bash"):
        done = subprocess.run(["bash", "-n"], input=script, text=True, capture_output=True, timeout=30, check=False)
        assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("hosts", "count", "names"), [
    ([None, None, None], 3, []),                      # by count: the job's nodes are assigned at run time
    (["gpu-01", "gpu-02", "gpu-03"], 3, ["gpu-01", "gpu-02", "gpu-03"]),  # by name
    (["gpu-01", None, None], 3, ["gpu-01"]),          # both: gpu-01 and two more
    (["gpu-01", "gpu-01", None], 2, ["gpu-01"]),      # two topology nodes on one machine
])
def test_nodes_by_count_and_by_name(hosts: list[str | None], count: int, names: list[str]) -> None:
    topo = topology({"gpus_per_node": 8}, hosts)
    assert job_nodes(topo) == (count, names)
    script = script_of(topo, Path("/shared/run"))
    assert f"#SBATCH --nodes={count}" in script.splitlines()
    assert ("#SBATCH --nodelist=" + ",".join(names) in script.splitlines()) == bool(names)
    assert "#SBATCH --gpus-per-node=8" in script.splitlines()


def test_two_renders_are_identical(tmp_path: Path) -> None:
    topo = topology(FULL, [None, "gpu-02", None])
    assert script_of(topo, tmp_path) == script_of(topology(FULL, [None, "gpu-02", None]), tmp_path)


def test_addresses_as_hosts_are_refused_with_the_fix() -> None:
    with pytest.raises(UserError) as err:
        script_of(topology({}, ["10.0.0.11", None, None]), Path("/shared/run"))
    assert "host 10.0.0.11 is an address" in err.value.message and "leave host out" in err.value.message


def _gpus(kind: str) -> list[dict]:
    return [{"name": n, "gpu": kind, "gpus": 4} for n in ("p0", "d0", "d1")]


@pytest.mark.parametrize(("segment", "kind", "nvlink", "line"), [
    (None, "gb300", "auto", "--segment=3"),     # NVL72 nodes: one NVLink domain by default
    (None, "gb200", "auto", "--segment=3"),
    (None, "h100", "auto", None),               # no multi-node NVLink: nothing to ask for
    (None, "h100", "on", "--segment=3"),        # transfer.nvlink: on expects one domain
    (False, "gb300", "on", None),               # a Slurm without topology/block: the profile switches it off
    (True, "h100", "auto", "--segment=3"),
    (2, "gb300", "auto", "--segment=2"),
])
def test_the_nvlink_segment(segment, kind: str, nvlink: str, line: str | None) -> None:
    slurm = {} if segment is None else {"segment": segment}
    topo = sglang_on_slurm([None, None, None], slurm, nodes=_gpus(kind),
                           transfer={"backend": "nixl", "protocol": "rdma", "nvlink": nvlink})
    lines = [x for x in script_of(topo, Path("/shared/run")).splitlines() if x.startswith("#SBATCH --segment")]
    assert lines == ([f"#SBATCH {line}"] if line else [])


def test_no_segment_beyond_one_nvl72_domain() -> None:
    nodes = [{"name": f"n{i}", "gpu": "gb300", "gpus": 4} for i in range(19)]
    topo = sglang_on_slurm([None] * 19, {}, nodes=nodes, prefill={"nodes": ["n0"], "tp": 4},
                           decode={"nodes": [f"n{i}" for i in range(1, 19)], "tp": 4}, router={"node": "n0"})
    assert "--segment" not in script_of(topo, Path("/shared/run"))


def test_a_bad_segment_is_refused() -> None:
    with pytest.raises(UserError) as err:
        sglang_on_slurm([None, None, None], {"segment": 0})
    assert "slurm.segment" in err.value.message and "node count >= 1" in err.value.message
