"""Each node's architecture (`uname -m`) against the interpreter the render runs there: preflight's `arch`
check, on this machine's real kernel (an aarch64 interpreter on this x86_64 node is refused by execve:
Exec format error), and the wrapper's parsing on real binaries."""

from __future__ import annotations

import json
import os
import platform
import struct
import sys
from pathlib import Path

import pytest

from pdctl.preflight.parsers.arch import elf_machine, normalize, parse_arch
from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import local_cpu

OTHER = "aarch64" if normalize(platform.machine()) != "aarch64" else "x86_64"
E_MACHINE = {"aarch64": 0xB7, "x86_64": 0x3E}


def foreign_binary(path: Path) -> Path:
    """An ELF executable header for the other architecture (what an aarch64 venv's python is to x86_64)."""
    path.write_bytes(b"\x7fELF\x02\x01\x01" + b"\0" * 9 + struct.pack("<HHI", 2, E_MACHINE[OTHER], 1) + b"\0" * 200)
    path.chmod(0o755)
    return path


def test_elf_headers_of_real_binaries(tmp_path: Path) -> None:
    with open(os.path.realpath(sys.executable), "rb") as fh:
        assert elf_machine(fh.read(20).hex()) == normalize(platform.machine())
    assert elf_machine(foreign_binary(tmp_path / "py").read_bytes()[:20].hex()) == OTHER
    assert elf_machine(b"#!/bin/sh\nexec python3 \"$@\"\n"[:20].hex()) is None  # a script: not judged
    arch = parse_arch(f"noise\nPDCTL_ARCH arm64 {foreign_binary(tmp_path / 'p').read_bytes()[:20].hex()}\n")
    assert arch is not None and arch.machine == "arm64" and arch.mismatch == (OTHER != "aarch64")
    assert parse_arch("no marker here") is None
    only = parse_arch("PDCTL_ARCH x86_64")  # od missing on the node: the architecture alone, nothing judged
    assert only is not None and only.binary is None and not only.mismatch


def _checks(doc: dict, check: str) -> list[dict]:
    return [c for node in doc["nodes"] for c in node["checks"] if c["check"] == check]


@pytest.mark.e2e
def test_preflight_reports_each_nodes_architecture_and_refuses_a_foreign_interpreter(
        tmp_path: Path, ref_checkpoint: Path) -> None:
    good = local_cpu(tmp_path, ref_checkpoint, name="arch-ok")
    done = pdctl("preflight", str(good), "--skip-transfer", "--json", "-", cwd=tmp_path, timeout=300)
    [arch] = _checks(json.loads(done.stdout), "arch")
    assert arch["ok"] and arch["message"].startswith(f"{platform.machine()} (uname -m); ")
    assert f"is an {normalize(platform.machine())} executable" in arch["message"]

    bad = local_cpu(tmp_path, ref_checkpoint, name="arch-bad", engine={"python": str(foreign_binary(tmp_path / "py"))})
    done = pdctl("preflight", str(bad), "--skip-transfer", "--json", "-", cwd=tmp_path, timeout=300)
    assert done.returncode == 1, done.stderr[-2000:]
    doc = json.loads(done.stdout)
    [arch] = _checks(doc, "arch")
    assert not arch["ok"] and arch["severity"] == "error" and arch["found"] == OTHER
    assert f"but {tmp_path / 'py'} is an {OTHER} executable: it cannot run there" in arch["message"]
    assert "aarch64" in arch["fix"]
    [reach] = _checks(doc, "reach")
    assert not reach["ok"] and "Exec format error" in reach["message"]
