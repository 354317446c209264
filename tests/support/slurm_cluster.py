"""A real multi-node Slurm on namespaced hosts (tests/support/netns.py): slurmctld on one host, one slurmd per
compute host (each in its host's network, hostname and mounts: jobs run "on" that host), and a munged of its
own — nothing shared with a Slurm already on this machine (scripts/slurm/single-node.sh uses /etc/slurm and
the system munged; this one has its own config, socket, state and ports inside the hosts).

Client commands (sbatch, squeue, srun, scancel) reach it with SLURM_CONF=<cluster>/slurm.conf
(`SlurmCluster.env()`), from this machine over the bridge. The config follows single-node.sh's, including its
GRES: each node declares `gpus` GPUs (gres gpu:N) backed by device nodes with /dev/null's numbers, since Slurm
drops GPUs without a device file; jobs can then ask for --gres=gpu:N as on a GPU cluster.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.support.netns import Cluster, Host

DAEMONS = ("slurmctld", "slurmd", "munged", "sbatch", "srun")
WAIT_S = 90.0


def slurm_missing_reason() -> str | None:
    """Why a multi-node Slurm cannot be built here (None if it can)."""
    missing = [d for d in DAEMONS if shutil.which(d) is None and shutil.which(d, path="/usr/sbin") is None]
    if missing:
        return f"Slurm/munge not installed ({', '.join(missing)}): make system-deps (as root) installs them"
    if os.geteuid() != 0:
        return "a Slurm cluster on namespaced hosts needs root"
    return None


def _which(tool: str) -> str:
    return shutil.which(tool) or shutil.which(tool, path="/usr/sbin") or tool


@dataclass
class SlurmCluster:
    """slurmctld on `controller`, slurmd on each of `nodes`; everything under `root`."""

    hosts: Cluster
    controller: Host
    nodes: list[Host]
    root: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    gpus: int = 2
    partition: str = "pd13"

    @property
    def conf(self) -> Path:
        return self.root / "slurm.conf"

    @property
    def munge_dir(self) -> Path:
        """Outside the (root-only) test tmp tree: munged runs as the munge user and must reach it."""
        return Path(tempfile.gettempdir()) / f"pd13-munge-{self.hosts.pid}"

    def env(self) -> dict[str, str]:
        """The environment that points Slurm's client commands at this cluster."""
        return {**os.environ, "SLURM_CONF": str(self.conf)}

    def node_names(self) -> list[str]:
        return [h.hostname for h in self.nodes]

    def write_conf(self) -> None:
        cpus = os.cpu_count() or 2
        lines = [
            f"ClusterName=pd13x{self.hosts.pid}",
            f"SlurmctldHost={self.controller.hostname}({self.controller.address})",
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_dir / 'munge.sock'}",
            "ProctrackType=proctrack/linuxproc",
            "TaskPlugin=task/none",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SlurmUser=root",
            "SlurmdUser=root",
            f"StateSaveLocation={self.root / 'state'}",
            f"SlurmdSpoolDir={self.root / 'spool-%n'}",
            f"SlurmctldPidFile={self.root / 'slurmctld.pid'}",
            f"SlurmdPidFile={self.root / 'slurmd-%n.pid'}",
            f"SlurmctldLogFile={self.root / 'log' / 'slurmctld.log'}",
            f"SlurmdLogFile={self.root / 'log' / 'slurmd-%n.log'}",
            "ReturnToService=2",
            "MpiDefault=none",
            "JobAcctGatherType=jobacct_gather/none",
            "SlurmctldTimeout=30",
            "SlurmdTimeout=30",
            "InactiveLimit=0",
            "KillWait=5",
            "GresTypes=gpu",
        ]
        for host in self.nodes:
            lines.append(f"NodeName={host.hostname} NodeAddr={host.address} CPUs={cpus} RealMemory=1000 "
                         f"Gres=gpu:{self.gpus} State=UNKNOWN")
        nodes = ",".join(self.node_names())
        lines.append(f"PartitionName={self.partition} Nodes={nodes} Default=YES MaxTime=INFINITE State=UP "
                     "OverSubscribe=YES")
        self.conf.write_text("\n".join(lines) + "\n")
        devices = self.root / "dev"
        devices.mkdir(exist_ok=True)
        for i in range(self.gpus):
            if not (devices / f"gpu{i}").exists():
                os.mknod(devices / f"gpu{i}", 0o644 | stat.S_IFCHR, os.makedev(1, 3))
        gres = ["AutoDetect=off"] + [f"NodeName={h.hostname} Name=gpu File={devices}/gpu[0-{self.gpus - 1}]"
                                     for h in self.nodes]
        (self.root / "gres.conf").write_text("\n".join(gres) + "\n")

    def _munge(self) -> None:
        """Its own munged (key, socket, pid, log, seed under root/munge), as the munge user."""
        for stale in Path(tempfile.gettempdir()).glob("pd13-munge-*"):
            match = re.match(r"pd13-munge-(\d+)$", stale.name)
            if match and not Path(f"/proc/{match.group(1)}").exists():
                shutil.rmtree(stale, ignore_errors=True)
        munge = self.munge_dir
        munge.mkdir(mode=0o700, parents=True, exist_ok=True)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        shutil.chown(munge, "munge", "munge")
        shutil.chown(key, "munge", "munge")
        key.chmod(0o400)
        munge.chmod(0o755)  # clients (root) reach the socket; munged insists the dir is not group/other-writable
        argv = ["runuser", "-u", "munge", "--", _which("munged"), "-F", "--force", f"--socket={munge / 'munge.sock'}",
                f"--key-file={key}", f"--pid-file={munge / 'munged.pid'}", f"--log-file={munge / 'munged.log'}",
                f"--seed-file={munge / 'munged.seed'}"]
        self.procs.append(subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                           start_new_session=True))
        deadline = time.monotonic() + 20
        while not (munge / "munge.sock").exists():
            if time.monotonic() > deadline or self.procs[-1].poll() is not None:
                raise RuntimeError(f"munged did not start: {(munge / 'munged.log').read_text() if (munge / 'munged.log').exists() else ''}")
            time.sleep(0.1)

    def start(self) -> SlurmCluster:
        (self.root / "state").mkdir(parents=True, exist_ok=True)
        (self.root / "log").mkdir(exist_ok=True)
        for host in self.nodes:
            (self.root / f"spool-{host.hostname}").mkdir(exist_ok=True)
        try:
            self._munge()
            self.write_conf()
            ctl = self.controller.popen([_which("slurmctld"), "-D", "-i", "-f", str(self.conf)],
                                        self.root / "log" / "slurmctld.out")
            self.procs.append(ctl)
            for host in self.nodes:
                proc = host.popen([_which("slurmd"), "-D", "-f", str(self.conf), "-N", host.hostname],
                                  self.root / "log" / f"slurmd-{host.hostname}.out")
                self.procs.append(proc)
            self._wait_nodes_up()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_nodes_up(self) -> None:
        deadline = time.monotonic() + WAIT_S
        last = ""
        while time.monotonic() < deadline:
            for proc in self.procs:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Slurm daemon exited ({proc.args}): {self.logs()}")
            done = subprocess.run(["sinfo", "-h", "-N", "-o", "%N %T"], env=self.env(), capture_output=True,
                                  text=True, timeout=30, check=False)
            last = done.stdout + done.stderr
            states = dict(line.split() for line in done.stdout.splitlines() if len(line.split()) == 2)
            if all(states.get(n) in ("idle", "mixed", "allocated") for n in self.node_names()):
                return
            time.sleep(1)
        raise RuntimeError(f"Slurm nodes not up within {WAIT_S:.0f}s: {last}\n{self.logs()}")

    def logs(self) -> str:
        out = []
        for path in sorted((self.root / "log").glob("*")):
            out.append(f"--- {path.name}\n{path.read_text(errors='replace')[-1500:]}")
        return "\n".join(out)

    def squeue(self) -> str:
        return subprocess.run(["squeue", "-h", "-o", "%i %T %N"], env=self.env(), capture_output=True, text=True,
                              timeout=30, check=False).stdout

    def stop(self) -> None:
        """Cancel every job, stop the daemons (their process groups), wait until they are gone."""
        if any(p.poll() is None for p in self.procs):
            subprocess.run(["scancel", "--full", "--quiet", f"--partition={self.partition}"], env=self.env(),
                           capture_output=True, timeout=30, check=False)
            deadline = time.monotonic() + 30
            while self.squeue().strip() and time.monotonic() < deadline:
                time.sleep(0.5)
        for proc in reversed(self.procs):
            try:
                os.killpg(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                continue
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        self.procs.clear()
        shutil.rmtree(self.munge_dir, ignore_errors=True)


def start_slurm(hosts: Cluster, root: Path, *, controller: str, nodes: str) -> SlurmCluster:
    """slurmctld on host CONTROLLER, slurmd on each host in NODES (letters); stopped with the hosts too."""
    cluster = SlurmCluster(hosts, hosts[controller], [hosts[x] for x in nodes], root)
    hosts[controller].extra.setdefault("stops", []).insert(0, cluster.stop)  # type: ignore[union-attr]
    return cluster.start()
