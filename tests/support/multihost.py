"""Namespaced hosts (tests/support/netns.py) each with its own real sshd on port 22 of its own address, and the
engine's environment at one path on every host (`<tmp>/engine`, bind-mounted per host, as a cluster mounts
its software at one path on every node): a multi-host deployment target on one machine.

`start_multihost(tmp)` returns a MultiHost; `node(letter, name)` is a topology `nodes:` entry for a host,
reached over ssh. A host can be given another environment (`use_env`) or lose a directory (`hide`) to
provoke the failures preflight must catch.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pdctl.reference.checkpoint import init_checkpoint
from tests.support.netns import Cluster, Host
from tests.support.sshd import SSHServer, start_sshd

MAIN_ENV = Path(sys.prefix)  # the environment running the tests (a venv: its directory)


@dataclass
class MultiHost:
    """The hosts, their sshds, and the engine path every host has."""

    cluster: Cluster
    sshd: dict[str, SSHServer]
    engine_dir: Path

    @property
    def python(self) -> str:
        """engine.python for topologies on these hosts: the same path everywhere, each host's own env."""
        return str(self.engine_dir / "bin" / "python")

    def __getitem__(self, letter: str) -> Host:
        return self.cluster[letter]

    def node(self, letter: str, name: str, *, gpus: int = 4, **over: Any) -> dict[str, Any]:
        """The topology node of host LETTER: its address, reached over its sshd."""
        return {"name": name, "host": self.cluster[letter].address, "gpu": "cpu", "gpus": gpus,
                "ssh": self.sshd[letter].ssh_config(), **over}

    def use_env(self, letter: str, env: Path) -> None:
        """Host LETTER runs ENV (a Python environment) at the engine path from now on."""
        self.cluster[letter].bind(env, self.engine_dir)

    def restore_env(self, letter: str) -> None:
        self.cluster[letter].unbind(self.engine_dir)

    def hide(self, letter: str, directory: Path) -> None:
        """DIRECTORY is empty on host LETTER (e.g. the model missing on one node)."""
        empty = self.cluster.tmp / f"empty-{letter}"
        empty.mkdir(exist_ok=True)
        self.cluster[letter].bind(empty, directory)

    def stop(self) -> None:
        self.cluster.stop()


def start_multihost(tmp: Path, letters: str = "abc", *, sshd_log_level: str = "ERROR") -> MultiHost:
    """Hosts LETTERS with an sshd each (logins checked), the engine env bound at `<tmp>/engine`; SSHD_LOG_LEVEL
    INFO makes each sshd log its connections (SSHServer.logins)."""
    cluster = Cluster(tmp, letters).start()
    try:
        engine_dir = tmp / "engine"
        engine_dir.mkdir(parents=True, exist_ok=True)
        servers: dict[str, SSHServer] = {}
        for letter, host in cluster.hosts.items():
            host.bind(MAIN_ENV, engine_dir)
            server = start_sshd(tmp / f"sshd-{letter}", listen=host.address, port=22, enter=host.enter,
                                log_level=sshd_log_level)
            servers[letter] = server
            host.extra.setdefault("stops", []).append(server.stop)  # type: ignore[union-attr]
        return MultiHost(cluster, servers, engine_dir)
    except BaseException:
        cluster.stop()
        raise


@contextlib.contextmanager
def hosts_with_checkpoint(tmp: Path) -> Iterator[dict[str, Any]]:
    """The hosts of start_multihost and a reference-tiny checkpoint in TMP/models (the preflight e2e fixtures):
    {"mh", "tmp", "checkpoint", "models"}; the hosts are stopped afterwards."""
    models = tmp / "models"
    models.mkdir()
    checkpoint = init_checkpoint(models / "reference-tiny", seed=0)
    mh = start_multihost(tmp)
    try:
        yield {"mh": mh, "tmp": tmp, "checkpoint": checkpoint, "models": models}
    finally:
        mh.stop()


def other_pdctl_env(tmp: Path, version: str) -> Path:
    """A second, real Python environment with another pdctl: a venv that sees the main environment's packages
    (torch, nixl, ...) but has its own copy of pdctl, at VERSION, first on its path — what a node with an
    older or newer install of the engine looks like."""
    env = tmp / f"env-pdctl-{version}"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)],
                   check=True, capture_output=True, timeout=120)
    site = next((env / "lib").glob("python3*/site-packages"))
    main_site = next((MAIN_ENV / "lib").glob("python3*/site-packages"))
    (site / "zz_main_env.pth").write_text(f"import site; site.addsitedir({str(main_site)!r})\n")
    package = Path(__file__).resolve().parents[2] / "pdctl"
    shutil.copytree(package, site / "pdctl", ignore=shutil.ignore_patterns("__pycache__"))
    init = site / "pdctl" / "__init__.py"
    text = init.read_text()
    init.write_text(text.replace('__version__ = "', f'__version__ = "{version}"  # was "', 1))
    return env


def pd_topology(mh: MultiHost, tmp: Path, checkpoint: Path, *, backend: str, name: str,
                **over: Any) -> Path:
    """The reference-engine PD topology on the hosts: prefill TP2 on host a, decode TP1 on host b, the router
    on host c, all reached over ssh; each host has its own ports, so the ports are the defaults."""
    import yaml

    doc: dict[str, Any] = {
        "name": name,
        "engine": {"kind": "reference", "python": mh.python},
        "model": {"path": str(checkpoint)},
        "nodes": [mh.node("a", "pa"), mh.node("b", "db"), mh.node("c", "rc")],
        "transfer": {"backend": backend},
        "server": {"page_size": 16},
        "prefill": {"nodes": ["pa"], "tp": 2, "port": 30000},
        "decode": {"nodes": ["db"], "tp": 1, "port": 30100},
        "router": {"node": "rc", "host": "0.0.0.0", "port": 8000},
    }
    for key, value in over.items():
        doc[key] = {**doc[key], **value} if isinstance(value, dict) and isinstance(doc.get(key), dict) else value
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def scale_topology(mh: MultiHost, tmp: Path, checkpoint: Path, *, prefill: str, decode: str, name: str,
                   python: str | None = None, backend: str = "nixl") -> Path:
    """A PD topology with one TP1 prefill replica on each host of PREFILL and one TP1 decode replica on each
    host of DECODE (letters), the router on the first decode host: preflight at cluster scale. PYTHON: the
    engine's interpreter (default: the engine env's)."""
    import yaml

    names = {x: f"p{x}" for x in prefill} | {x: f"d{x}" for x in decode}
    doc: dict[str, Any] = {
        "name": name,
        "engine": {"kind": "reference", "python": python or mh.python},
        "model": {"path": str(checkpoint)},
        "nodes": [mh.node(x, names[x], gpus=1) for x in prefill + decode],
        "transfer": {"backend": backend},
        "server": {"page_size": 16},
        "prefill": {"nodes": [names[x] for x in prefill], "tp": 1, "replicas": len(prefill), "port": 30000},
        "decode": {"nodes": [names[x] for x in decode], "tp": 1, "replicas": len(decode), "port": 30100},
        "router": {"node": names[decode[0]], "host": "0.0.0.0", "port": 8000},
    }
    path = tmp / f"{name}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def counting_python(mh: MultiHost, tmp: Path) -> tuple[str, Path]:
    """(an engine.python, its log): a shell wrapper around the engine env's Python that appends one line per
    start, `<hostname> <-m module | -c>`, before running it — how many probes and transfer agents each host
    started, counted on the hosts themselves."""
    log = tmp / "python-starts.log"
    wrapper = tmp / "counting-python"
    wrapper.write_text("#!/bin/sh\n"
                       f'case "$1" in -m) what="-m $2";; *) what="$1";; esac\n'
                       f'echo "$(hostname) $what" >> {log}\n'
                       f'exec {mh.python} "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper), log
