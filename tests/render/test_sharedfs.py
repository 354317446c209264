"""Which job paths a Slurm job's nodes likely cannot read, from the filesystem under them (/proc/mounts)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from pdctl.render.sharedfs import mount_of, mounts, unshared, why_not_shared

TABLE = mounts("""\
overlay / overlay rw 0 0
tmpfs /dev/shm tmpfs rw 0 0
nas:/export/home /home nfs4 rw 0 0
lustre@o2ib:/scratch /lustre lustre rw 0 0
/dev/nvme0n1 /local ext4 rw 0 0
/dev/sdb /mnt/my\\040disk xfs rw 0 0
""")


def test_the_filesystem_under_a_path() -> None:
    assert mount_of("/home/alice/runs/x", TABLE).fstype == "nfs4"  # a path that does not exist: its ancestor's
    assert mount_of("/lustre", TABLE).fstype == "lustre" and mount_of("/srv", TABLE).fstype == "overlay"
    assert mount_of("/mnt/my disk/x", TABLE).fstype == "xfs"  # octal escapes of /proc/mounts


def test_network_filesystems_pass_and_local_ones_are_named() -> None:
    assert why_not_shared("/home/alice/.pdctl/runs/x", TABLE) is None
    assert why_not_shared("/lustre/proj/run", TABLE) is None
    assert why_not_shared("/dev/shm/run", TABLE) == "on tmpfs (/dev/shm): in this machine's memory, no other node sees it"
    assert why_not_shared("/tmp/run", TABLE) == "under /tmp, which is per node on a cluster"
    assert why_not_shared("/local/run", TABLE) == "on a local ext4 filesystem (/local), not a network filesystem"
    lines = unshared({"run dir": "/tmp/r", "working directory": "/home/alice"}, TABLE)
    assert lines == ["run dir /tmp/r is under /tmp, which is per node on a cluster"]


def test_a_real_tmpfs_path_on_this_machine() -> None:
    with tempfile.TemporaryDirectory(dir="/dev/shm") as shm:
        assert mount_of(Path(shm) / "run").fstype == "tmpfs"
        assert "on tmpfs" in why_not_shared(Path(shm) / "run")
