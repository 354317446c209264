"""Where and how the processes of a topology run on a cluster: the `slurm:` section (what the job asks Slurm
for, what runs before each step) and `engine.container:` (the image the engine runs in).

Kept apart from sections.py because these describe the machinery around the servers, not the servers: a
topology without them runs its commands as they are, on nodes named by host. Key names follow srtctl
(NVIDIA srt-slurm) where the concept is the same (`time_limit`, `sbatch_directives`, `srun_options`,
`network_interface`), so that its users recognise them.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from pdctl.topology.base import EnvMap, Section

# Slurm's --time forms: minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
# days-hours:minutes:seconds; and "UNLIMITED" / "INFINITE".
SLURM_TIME = re.compile(r"^(\d+(:\d{1,2}){0,2}|\d+-\d+(:\d{1,2}){0,2}|unlimited|infinite)$", re.IGNORECASE)
_WORD = r"^[^\s\"'\\]+$"  # one shell word, no quoting needed: partition, account, gres, ...
# #SBATCH options pdctl writes itself from the topology: a directive for one of these would contradict it.
SBATCH_RENDERED: dict[str, str] = {
    "nodes": "the topology's nodes", "N": "the topology's nodes", "nodelist": "nodes[].host", "w": "nodes[].host",
    "output": "the run dir (--run-dir)", "o": "the run dir (--run-dir)", "job-name": "slurm.job_name",
    "J": "slurm.job_name", "partition": "slurm.partition", "p": "slurm.partition", "account": "slurm.account",
    "A": "slurm.account", "qos": "slurm.qos", "q": "slurm.qos", "time": "slurm.time_limit", "t": "slurm.time_limit",
    "reservation": "slurm.reservation", "constraint": "slurm.constraint", "C": "slurm.constraint",
    "gres": "slurm.gres", "gpus-per-node": "slurm.gpus_per_node", "exclusive": "slurm.exclusive",
}
# srun options pdctl renders on every step (one task on one named node, sharing the allocation).
SRUN_RENDERED: dict[str, str] = {
    "nodes": "one node per step", "N": "one node per step", "ntasks": "one task per step", "n": "one task per step",
    "nodelist": "the process's node", "w": "the process's node", "overlap": "every step overlaps",
    "job-name": "the process's name", "J": "the process's name", "jobid": "the allocation",
}
CONTAINER_SRUN = "container-"  # pyxis flags: engine.container renders them


def option_lines(value: Any, what: str) -> Any:
    """Extra command-line options written as a list (`["--mail-type=END", "--comment=x"]`, `-`/`--` optional)
    or a mapping (`{mail-type: END, exclusive: true}`: true / "" / null = a bare flag, false = left out), as
    `--key[=value]` strings. Values must be one line."""
    if isinstance(value, dict):
        out: list[Any] = []
        for key, val in value.items():
            if not isinstance(key, str) or not key.strip("-"):
                raise ValueError(f"expected option names as keys, got {key!r}")
            if val is False:
                continue
            flag = "--" + key.lstrip("-") if len(key.lstrip("-")) > 1 else "-" + key.lstrip("-")
            if val is True or val is None or val == "":
                out.append(flag)
            elif isinstance(val, (str, int, float)):
                out.append(f"{flag}={val}" if flag.startswith("--") else f"{flag} {val}")
            else:
                raise ValueError(f"{what} {key!r}: expected a scalar, true or null, got {val!r}")
        value = out
    if isinstance(value, list):
        lines = []
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise ValueError(f"expected {what} as strings, got {item!r}")
            text = item.strip()
            if "\n" in text or "\r" in text:
                raise ValueError(f"{what} {text!r}: expected one line")
            lines.append(text if text.startswith("-") else "--" + text)
        return lines
    return value


def option_name(line: str) -> str:
    """'--gres=gpu:4' -> 'gres'; '-C a100' -> 'C'."""
    return re.split(r"[=\s]", line.lstrip("-"), maxsplit=1)[0]


class SlurmConfig(Section):
    """How `pdctl launch` asks Slurm for the deployment's nodes (the sbatch script's #SBATCH lines), and what
    runs before each process on a Slurm node. With this section, nodes may leave out `host`: the job's nodes
    (`scontrol show hostnames $SLURM_JOB_NODELIST`) are assigned to them in order at run time."""

    partition: str | None = Field(None, pattern=_WORD, description="--partition.")
    account: str | None = Field(None, pattern=_WORD, description="--account.")
    qos: str | None = Field(None, pattern=_WORD, description="--qos.")
    time_limit: str | None = Field(
        None, description='--time: minutes, "HH:MM:SS", "D-HH:MM:SS" (or UNLIMITED); quote it in YAML.'
    )
    reservation: str | None = Field(None, pattern=_WORD, description="--reservation.")
    constraint: str | None = Field(None, min_length=1, description="--constraint (node features, e.g. gb300).")
    gres: str | None = Field(None, pattern=_WORD, description='--gres, e.g. "gpu:4" (instead of gpus_per_node).')
    gpus_per_node: int | None = Field(
        None, ge=0,
        description="--gpus-per-node. Default: the nodes' `gpus` when every node has GPUs and the same count; "
        "0 = no GPU directive. Not with gres.",
    )
    exclusive: bool = Field(True, description="--exclusive: whole nodes for the job (false on shared clusters).")
    job_name: str | None = Field(None, pattern=_WORD, description="--job-name (default pdctl-<name>).")
    sbatch_directives: list[str] = Field(
        default_factory=list,
        description='Extra #SBATCH options: a list ["--mail-type=END"] or a mapping {mail-type: END, '
        "requeue: true}.",
    )
    srun_options: list[str] = Field(
        default_factory=list,
        description='Extra options of every srun step: a list ["--cpu-bind=none"] or a mapping '
        "{cpu-bind: none, mpi: pmix}.",
    )
    setup: list[str] = Field(
        default_factory=list,
        description="Shell lines run before every process on a Slurm node (module load ..., source "
        "<venv>/bin/activate), inside the container when there is one.",
    )
    network_interface: str | None = Field(
        None, pattern=r"^[A-Za-z0-9_.:@-]+$",
        description="Interface whose IPv4 address the allocated nodes advertise (default: the address the "
        "node's hostname resolves to on it).",
    )
    segment: bool | int | None = Field(
        None,
        description="#SBATCH --segment (Slurm's topology segments: on GB200/GB300 one NVL72 NVLink domain). true = "
        "the job's node count, N = segments of N nodes, false = never (a Slurm without topology/block rejects "
        "it). Default: on for GB200/GB300 nodes or transfer.nvlink: on, when the job fits one NVL72 domain "
        "(18 nodes).",
    )
    job_python: str | dict[str, str] | None = Field(
        None,
        description="The interpreter that runs pdctl in the job, on the compute nodes: a path, or one per "
        "architecture {aarch64: /shared/pdctl-arm/bin/python, x86_64: ...} (`uname -m` of the job's first "
        "node). Default: the submitting interpreter where the architecture is the same, else a venv built in "
        "the job (job_venv).",
    )
    job_venv: str = Field(
        "~/.cache/pdctl/venvs",
        min_length=1,
        description="Where a job whose node architecture differs from the submit host's builds pdctl's venv "
        "(one per architecture and Python, under flock, reused by later jobs; with uv when on PATH, else "
        "python -m venv + pip).",
    )
    job_base_python: str = Field(
        "python3", min_length=1, description="The compute node's interpreter the job's venv is built from."
    )
    job_pip_args: list[str] = Field(
        default_factory=list,
        description='Extra options of the venv\'s pip install (e.g. ["--index-url", "https://mirror/simple"] '
        'or ["--no-index", "--find-links", "/shared/wheels"] on nodes without internet).',
    )

    @field_validator("segment")
    @classmethod
    def _segment(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value < 1:
            raise ValueError(f"expected true, false or a node count >= 1, got {value}")
        return value

    @field_validator("job_python")
    @classmethod
    def _job_python(cls, value: Any) -> Any:
        if isinstance(value, dict):
            bad = [k for k in value if not re.fullmatch(r"[a-z0-9_]+", str(k))]
            if bad or not value:
                raise ValueError("expected an interpreter path, or a mapping from `uname -m` names (x86_64, "
                                 f"aarch64, ...) to interpreter paths, got {value!r}")
        return value

    @field_validator("time_limit", mode="before")
    @classmethod
    def _time(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # minutes
        if isinstance(value, str) and not SLURM_TIME.match(value.strip()):
            raise ValueError(f"expected a Slurm time limit (minutes, \"HH:MM:SS\" or \"D-HH:MM:SS\"), got {value!r}")
        return value.strip() if isinstance(value, str) else value

    @field_validator("sbatch_directives", mode="before")
    @classmethod
    def _directives(cls, value: Any) -> Any:
        lines = option_lines(value, "#SBATCH options")
        _refuse_rendered(lines, SBATCH_RENDERED, "#SBATCH")
        return lines

    @field_validator("srun_options", mode="before")
    @classmethod
    def _srun(cls, value: Any) -> Any:
        lines = option_lines(value, "srun options")
        _refuse_rendered(lines, SRUN_RENDERED, "srun")
        if isinstance(lines, list):
            for line in lines:
                if option_name(line).startswith(CONTAINER_SRUN):
                    raise ValueError(f"{line!r}: pdctl renders pyxis's --container-* options from engine.container")
        return lines

    @field_validator("setup", mode="before")
    @classmethod
    def _setup(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value


def _refuse_rendered(lines: Any, rendered: dict[str, str], what: str) -> None:
    if not isinstance(lines, list):
        return
    for line in lines:
        name = option_name(line)
        if name in rendered:
            flag = f"-{name}" if len(name) == 1 else f"--{name}"
            raise ValueError(f"{line!r}: pdctl renders {what} {flag} itself (from {rendered[name]})")


_ABSOLUTE = "an absolute path"
MOUNT_FLAGS = ("ro", "rw")


def parse_mount(text: str) -> tuple[str, str, str | None]:
    """'SRC:DST[:ro|rw]' -> (src, dst, flag); ValueError naming what is wrong."""
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        raise ValueError(f"expected SRC:DST or SRC:DST:ro, got {text!r}")
    src, dst = parts[0], parts[1]
    flag = parts[2] if len(parts) == 3 else None
    for path, which in ((src, "source"), (dst, "destination")):
        if not path.startswith("/"):
            raise ValueError(f"mount {text!r}: the {which} must be {_ABSOLUTE} (the node's), got {path!r}")
        if any(c in path for c in ",\n\r"):
            raise ValueError(f"mount {text!r}: a path with ',' or a newline cannot be mounted")
    if flag is not None and flag not in MOUNT_FLAGS:
        raise ValueError(f"mount {text!r}: expected the flag ro or rw, got {flag!r}")
    return src, dst, flag


class ContainerConfig(Section):
    """The container image the engine (servers, router, preflight's probes) runs in: `docker run` on local and
    ssh nodes, pyxis/enroot (`srun --container-image`) on Slurm."""

    image: str = Field(
        ..., min_length=1, pattern=r"^\S+$",
        description="Image: a registry reference (lmsysorg/sglang:v0.5.4, nvcr.io/nvidia/x:tag) or, on Slurm "
        "only, an enroot squashfs file (/shared/sglang.sqsh).",
    )
    mounts: list[str] = Field(
        default_factory=list,
        description='Bind mounts "SRC:DST[:ro]" (absolute paths on the node), or a mapping {SRC: DST}. A local '
        "model.path is mounted at the same path (read-only) unless a mount covers it.",
    )
    env: EnvMap = Field(
        default_factory=dict, description="Environment set in the container (also for setup lines and probes)."
    )
    workdir: str | None = Field(None, pattern=r"^/\S*$", description="Working directory in the container.")
    docker_args: list[str] = Field(
        default_factory=list,
        description='Extra `docker run` options on local/ssh nodes, e.g. ["--privileged"] or ["--shm-size=32g"].',
    )

    @field_validator("mounts", mode="before")
    @classmethod
    def _mounts(cls, value: Any) -> Any:
        if isinstance(value, dict):
            value = [f"{src}:{dst}" for src, dst in value.items()]
        if isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    parse_mount(item)
        return value


    def parsed_mounts(self) -> list[tuple[str, str, str | None]]:
        return [parse_mount(m) for m in self.mounts]
