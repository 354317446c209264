"""What a Slurm launch needs on every node besides the engine: its run dir shared with the launching node,
and the working directory and Python environment it starts its steps with.

The launch (on the job's first node) writes a token file into the run dir and every node must read the same
token back: a run dir on a node-local disk (/tmp, a local ext4) exists on one node only, or as different
directories. pdctl.render.sharedfs warns about it when the job is rendered (a judgement from the
filesystem type); this is the proof on the nodes themselves. Skipped in a container (the probe then sees the
image's files, not the node's).
"""

from __future__ import annotations

from pathlib import Path

from pdctl.preflight.context import Context, NodeCheck
from pdctl.preflight.report import failed, passed

FIX = ("put it on a filesystem every node mounts (a home or project directory on NFS, Lustre, GPFS, ...): "
       "/tmp and local disks are per node")


def run(ctx: Context) -> list[NodeCheck]:
    out: list[NodeCheck] = []
    reached = [n for n in ctx.facts if ctx.reached(n)]
    for path, token in ctx.shared_files.items():
        directory = str(Path(path).parent)
        for name in reached:
            got = (ctx.fact(name, "read_files") or {}).get(path) or {}
            if got.get("text") == token:
                out.append((name, passed("shared.run_dir", f"run dir {directory} shared with the launching node",
                                         directory)))
                continue
            why = got.get("error") or ("another directory of the same name: not shared" if "text" in got
                                       else "not read")
            out.append((name, failed("shared.run_dir", f"run dir {directory} is not shared with the launching "
                                     f"node ({why})", found=why, expected="the launching node's token file",
                                     fix="--run-dir: " + FIX)))
    for what, directory in ctx.needed_dirs.items():
        for name in reached:
            if (ctx.fact(name, "dirs") or {}).get(directory):
                out.append((name, passed("shared.dirs", f"{what} {directory} exists", directory)))
            else:
                out.append((name, failed("shared.dirs", f"{what} {directory} does not exist on this node",
                                         found=None, expected=directory, fix=FIX)))
    return out
