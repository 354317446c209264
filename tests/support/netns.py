"""Several "hosts" on one machine for multi-host tests: network namespaces joined by a bridge, each host with
its own private address, hostname, boot id, /etc/hosts and /sys, and (tests/support/hostsshd.py) its own sshd.

Why each piece: the address and the bridge make traffic between hosts cross a real veth/bridge path; the
hostname and boot id are what UCX compares to decide that a peer is on the same machine (it would use
shared memory or loopback between namespaces otherwise, and the bytes would never cross the "network"); /sys
is remounted so that tools list the host's own interfaces (UCX reads /sys/class/net), with the cgroup
hierarchy bound back in for slurmd; /etc/hosts lets topologies name hosts that only the hosts resolve.

Each host is an "anchor" process (`sleep`) holding those namespaces; everything else enters them with
`nsenter -t <anchor> -n -u -m`. Names and the subnet carry this test process's pid, so concurrent runs do
not collide and a later run finds (and removes) what a killed run left: namespaces whose pid is dead.
Everything is removed by `Cluster.stop()`, which fixtures call in a finalizer and atexit calls as a last
resort. Traffic stays on these private addresses.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

PREFIX = "pd13"
IFNAME = "pd0"  # the interface inside every host (same name everywhere, like eth1 on real nodes)
_NS = re.compile(rf"^{PREFIX}-(?P<pid>\d+)-[a-z]$")
_live: list[Cluster] = []


def netns_missing_reason() -> str | None:
    """Why namespaced hosts cannot be built here (None if they can)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    for tool in ("ip", "nsenter", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"{tool} not found (iproute2 / util-linux)"
    return None


def _sh(argv: list[str], *, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if check and done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.strip()}")
    return done


def _pid_alive(pid: int) -> bool:
    return Path(f"/proc/{pid}").exists()


def clean_stale() -> list[str]:
    """Remove namespaces, links and processes of earlier runs whose test process is gone; returns what went."""
    removed = []
    listing = _sh(["ip", "netns", "list"], check=False).stdout.split()
    for name in listing:
        match = _NS.match(name)
        if match is None or _pid_alive(int(match.group("pid"))):
            continue
        _remove_netns(name)
        removed.append(name)
    for line in _sh(["ip", "-o", "link", "show"], check=False).stdout.splitlines():
        link = line.split(":")[1].strip().split("@")[0] if ":" in line else ""
        match = re.match(rf"^{PREFIX}[bv](?P<pid>\d+)", link)
        if match and not _pid_alive(int(match.group("pid"))):
            _sh(["ip", "link", "del", link], check=False)
            removed.append(link)
    return removed


def _remove_netns(name: str) -> None:
    """Kill every process still in the namespace (ours: only the harness starts processes there), delete it."""
    for _ in range(3):
        pids = [int(p) for p in _sh(["ip", "netns", "pids", name], check=False).stdout.split() if p.isdigit()]
        if not pids:
            break
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.2)
    _sh(["ip", "netns", "del", name], check=False)


@dataclass
class Host:
    """One namespaced host: its namespaces are those of the anchor process."""

    letter: str
    netns: str
    hostname: str
    address: str
    anchor: subprocess.Popen[bytes]
    root: Path  # per-host files (hosts, boot id)
    extra: dict[str, object] = field(default_factory=dict)

    def enter(self, argv: list[str], *, net_only: bool = False) -> list[str]:
        """ARGV run inside this host (its network, hostname and mounts; NET_ONLY: its network alone)."""
        spaces = ["-n"] if net_only else ["-n", "-u", "-m"]
        return ["nsenter", "-t", str(self.anchor.pid), *spaces, "--", *argv]

    def run(self, argv: list[str], *, timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
        return _sh(self.enter(argv), check=check, timeout=timeout)

    def popen(self, argv: list[str], log: Path) -> subprocess.Popen[bytes]:
        """A process of this host in its own process group, output to LOG."""
        with open(log, "ab") as fh:
            return subprocess.Popen(self.enter(argv), stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)

    def iface_bytes(self) -> tuple[int, int]:
        """(received, sent) bytes of the host's interface: proof that traffic crossed the bridge."""
        stats = f"/sys/class/net/{IFNAME}/statistics"
        done = self.run(["cat", f"{stats}/rx_bytes", f"{stats}/tx_bytes"])
        rx, tx = done.stdout.split()
        return int(rx), int(tx)

    def bind(self, source: str | Path, target: str | Path) -> None:
        """Bind-mount SOURCE over TARGET in this host only (another env, a hidden directory, ...)."""
        self.run(["mount", "--bind", str(source), str(target)])

    def unbind(self, target: str | Path) -> None:
        self.run(["umount", "-l", str(target)], check=False)


def _subnet(pid: int) -> str:
    """10.213.N: N from the pid, moved on if that subnet is already routed here (another run)."""
    routes = _sh(["ip", "-o", "route", "show"], check=False).stdout
    for i in range(250):
        n = (pid + i) % 250 + 1
        if f"10.213.{n}." not in routes:
            return f"10.213.{n}"
    raise RuntimeError("no free 10.213.N.0/24 subnet for namespaced hosts")


class Cluster:
    """N namespaced hosts on one bridge; `stop()` removes all of it."""

    def __init__(self, tmp: Path, letters: str = "abc") -> None:
        self.pid = os.getpid()
        self.tag = uuid.uuid4().hex[:4]
        self.tmp = tmp
        self.bridge = f"{PREFIX}b{self.pid}"
        self.subnet = _subnet(self.pid)
        self.hosts: dict[str, Host] = {}
        self.letters = letters
        self.stopped = False

    @property
    def gateway(self) -> str:
        """The bridge's address in the root namespace (where the test process reaches the hosts from)."""
        return f"{self.subnet}.1"

    def start(self) -> Cluster:
        clean_stale()
        _live.append(self)
        try:
            _sh(["ip", "link", "add", self.bridge, "type", "bridge"])
            _sh(["ip", "addr", "add", f"{self.gateway}/24", "dev", self.bridge])
            _sh(["ip", "link", "set", self.bridge, "up"])
            names = {letter: f"{PREFIX}-{self.pid}-{letter}" for letter in self.letters}
            addresses = {letter: f"{self.subnet}.{11 + i}" for i, letter in enumerate(self.letters)}
            hosts_file = "127.0.0.1 localhost\n" + "".join(f"{addresses[x]} {names[x]}\n" for x in self.letters)
            for letter in self.letters:
                self.hosts[letter] = self._host(letter, names[letter], addresses[letter], hosts_file)
        except BaseException:
            self.stop()
            raise
        return self

    def _host(self, letter: str, name: str, address: str, hosts_file: str) -> Host:
        netns, veth = name, f"{PREFIX}v{self.pid}{letter}"
        _sh(["ip", "netns", "add", netns])
        _sh(["ip", "link", "add", veth, "type", "veth", "peer", "name", f"{veth}p"])
        _sh(["ip", "link", "set", f"{veth}p", "netns", netns])
        _sh(["ip", "link", "set", veth, "master", self.bridge])
        _sh(["ip", "link", "set", veth, "up"])
        inside = ["ip", "netns", "exec", netns]
        _sh([*inside, "ip", "link", "set", f"{veth}p", "name", IFNAME])
        _sh([*inside, "ip", "addr", "add", f"{address}/24", "dev", IFNAME])
        _sh([*inside, "ip", "link", "set", IFNAME, "up"])
        _sh([*inside, "ip", "link", "set", "lo", "up"])
        root = self.tmp / f"host-{letter}"
        (root / "cgroup").mkdir(parents=True, exist_ok=True)
        (root / "hosts").write_text(hosts_file)
        (root / "boot_id").write_text(str(uuid.uuid4()) + "\n")
        setup = " && ".join([
            f"mount --rbind /sys/fs/cgroup {root / 'cgroup'}",
            "mount -t sysfs sysfs /sys",
            f"mount --rbind {root / 'cgroup'} /sys/fs/cgroup",
            f"umount -l {root / 'cgroup'}",
            f"mount --bind {root / 'boot_id'} /proc/sys/kernel/random/boot_id",
            f"mount --bind {root / 'hosts'} /etc/hosts",
            f"hostname {name}",
            "echo ready",
            "exec sleep 2147483647",
        ])
        anchor = subprocess.Popen(
            ["nsenter", f"--net=/run/netns/{netns}", "unshare", "--mount", "--uts", "--propagation", "private",
             "sh", "-c", setup],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True,
        )
        assert anchor.stdout is not None
        line = anchor.stdout.readline().decode().strip()
        if line != "ready":
            err = anchor.stderr.read().decode() if anchor.poll() is not None and anchor.stderr else ""
            raise RuntimeError(f"host {name} did not come up: {line!r} {err}")
        return Host(letter, netns, name, address, anchor, root)

    def stop(self) -> None:
        """Stop every process of every host, remove namespaces, veths and the bridge. Idempotent."""
        if self.stopped:
            return
        self.stopped = True
        for host in self.hosts.values():
            for stop in list(host.extra.get("stops", [])):  # type: ignore[union-attr]
                try:
                    stop()
                except Exception:  # noqa: BLE001, S110 - teardown goes on; leftovers are killed below
                    pass
            try:
                os.killpg(host.anchor.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            host.anchor.wait(timeout=10)
        for letter in self.letters:
            _remove_netns(f"{PREFIX}-{self.pid}-{letter}")
            _sh(["ip", "link", "del", f"{PREFIX}v{self.pid}{letter}"], check=False)
        _sh(["ip", "link", "del", self.bridge], check=False)
        if self in _live:
            _live.remove(self)

    def __getitem__(self, letter: str) -> Host:
        return self.hosts[letter]


@atexit.register
def _stop_all() -> None:
    for cluster in list(_live):  # noqa: PERF101 - stop() removes the cluster from _live
        cluster.stop()
