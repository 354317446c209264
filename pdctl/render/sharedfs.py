"""Is a path on a filesystem every node of a Slurm job can read? The job's script, its output, the run dir,
the working directory, the interpreter running pdctl and a local model directory are paths on the submit
host: the job reads and writes them on its nodes, so they must be on a filesystem the nodes share.

From the submit host alone this is a judgement, not a proof: the filesystem type under a path (the longest
mount point of /proc/mounts, as `df` finds it) says whether it is node-local (tmpfs, ramfs; /tmp and /var/tmp
are per node on every cluster) or a network/parallel filesystem (NFS, Lustre, GPFS, BeeGFS, CephFS, ...);
a local disk (ext4, xfs, ...) is local unless the cluster exports it. `pdctl launch --dry-run` and a
submission WARN with this (pdctl.launch.deploy, beside the sbatch script that names these paths:
pdctl.render.sbatch); preflight in the job then checks for real that every node reads the run dir
(pdctl.preflight.checks.shared) and fails when one does not.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

MOUNTS = Path("/proc/mounts")
# filesystems that several machines mount (network and parallel filesystems)
SHARED_TYPES = frozenset({
    "nfs", "nfs4", "lustre", "gpfs", "beegfs", "cephfs", "ceph", "glusterfs", "fuse.glusterfs", "wekafs",
    "panfs", "cifs", "smb3", "afs", "orangefs", "pvfs2", "fuse.juicefs", "fuse.sshfs", "fuse.gcsfuse",
    "fuse.s3fs", "virtiofs", "9p", "davfs", "fuse.rclone", "fuse.weka", "dvs", "quobyte", "fuse.quobyte",
})
# filesystems that live in one machine's memory
MEMORY_TYPES = frozenset({"tmpfs", "ramfs", "devtmpfs"})
NODE_LOCAL_DIRS = ("/tmp", "/var/tmp", "/dev/shm", "/run")


@dataclass(frozen=True)
class Mount:
    """The mount a path is on: its mount point and filesystem type."""

    point: str
    fstype: str


def _unescape(field: str) -> str:
    """/proc/mounts escapes blanks and backslashes as octal (\\040)."""
    return field.encode().decode("unicode_escape") if "\\" in field else field


def mounts(text: str | None = None) -> list[Mount]:
    """Every mount of /proc/mounts (or TEXT in its format)."""
    if text is None:
        try:
            text = MOUNTS.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 3:
            out.append(Mount(_unescape(parts[1]), parts[2]))
    return out


def mount_of(path: str | Path, table: list[Mount] | None = None) -> Mount | None:
    """The mount PATH is on (symlinks of the part that exists resolved): the longest mount point that contains
    it; the last such mount wins (a later mount hides an earlier one at the same point)."""
    resolved = os.path.realpath(path)
    best: Mount | None = None
    for mount in table if table is not None else mounts():
        point = mount.point.rstrip("/") or "/"
        inside = resolved == point or resolved.startswith(point + "/") or point == "/"
        if inside and (best is None or len(point) >= len(best.point.rstrip("/") or "/")):
            best = mount
    return best


def why_not_shared(path: str | Path, table: list[Mount] | None = None) -> str | None:
    """Why the nodes of a job likely cannot read PATH (None: it is on a shared filesystem, or unknown)."""
    absolute = os.path.abspath(path)
    mount = mount_of(absolute, table)
    if mount is not None and mount.fstype in SHARED_TYPES:
        return None
    if mount is not None and mount.fstype in MEMORY_TYPES:
        return f"on {mount.fstype} ({mount.point}): in this machine's memory, no other node sees it"
    local_dir = next((d for d in NODE_LOCAL_DIRS if absolute == d or absolute.startswith(d + "/")), None)
    if local_dir is not None:
        return f"under {local_dir}, which is per node on a cluster"
    if mount is not None:
        return f"on a local {mount.fstype} filesystem ({mount.point}), not a network filesystem"
    return None


def job_paths(run_dir: Path, model: str | None = None) -> dict[str, str]:
    """What a Slurm job of pdctl reads or writes on its nodes: the run dir (script, output, state, logs),
    the working directory (#SBATCH --chdir), the Python environment running pdctl there, a local model."""
    paths = {"run dir (--run-dir: script, job output, state, logs)": str(Path(run_dir).resolve()),
             "working directory (#SBATCH --chdir)": os.getcwd(),
             "Python environment running pdctl in the job": sys.prefix}
    if model and model.startswith("/") and Path(model).exists():  # else it is the nodes' own path
        paths["model.path"] = model
    return paths


def unshared(paths: dict[str, str], table: list[Mount] | None = None) -> list[str]:
    """One line per path of PATHS (what -> path) the nodes likely cannot read."""
    out = []
    for what, path in paths.items():
        why = why_not_shared(path, table)
        if why:
            out.append(f"{what} {path} is {why}")
    return out
