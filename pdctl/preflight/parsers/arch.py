"""A node's architecture and the architecture its interpreter was built for, from one shell line the probe's
wrapper prints before it runs the interpreter (`<marker> <uname -m> <first 20 bytes of the binary in hex>`):
an interpreter of another architecture cannot run on the node (Exec format error), or runs only under
emulation. The binary's architecture is its ELF header's e_machine (bytes 18-19, little-endian on the
architectures here)."""

from __future__ import annotations

from dataclasses import dataclass

ARCH_MARKER = "PDCTL_ARCH"
# The wrapper: uname -m of the node, then the ELF header of the interpreter $1 (a name on PATH or a path,
# symlinks resolved), then exec the probe. `od` and `readlink -f` are coreutils; missing ones leave a field empty.
ARCH_WRAPPER = (
    'p=$(command -v "$1" 2>/dev/null || printf %s "$1"); f=$(readlink -f "$p" 2>/dev/null || printf %s "$p"); '
    f'printf "{ARCH_MARKER} %s %s\\n" "$(uname -m)" "$(od -An -tx1 -N20 "$f" 2>/dev/null | tr -d \' \\n\')"; '
    'exec "$@"'
)
ELF_MACHINES = {0x3E: "x86_64", 0xB7: "aarch64", 0x15: "ppc64le", 0x16: "s390x", 0xF3: "riscv64", 0x03: "i686",
                0x28: "armv7l"}
_SAME = {"arm64": "aarch64", "amd64": "x86_64", "i386": "i686", "i586": "i686"}


def normalize(machine: str) -> str:
    return _SAME.get(machine, machine)


@dataclass(frozen=True)
class Arch:
    """The node's `uname -m` and the interpreter binary's architecture (None: not an ELF file, e.g. a
    script, or unreadable)."""

    machine: str
    binary: str | None

    @property
    def mismatch(self) -> bool:
        return self.binary is not None and normalize(self.machine) != self.binary

    def to_json(self) -> dict[str, str | None]:
        return {"machine": self.machine, "binary": self.binary}


def elf_machine(header_hex: str) -> str | None:
    """'7f454c46...' (>= 20 bytes) -> 'x86_64' / 'aarch64' / 'e_machine 0x..'; None when not ELF."""
    try:
        data = bytes.fromhex(header_hex)
    except ValueError:
        return None
    if len(data) < 20 or data[:4] != b"\x7fELF":
        return None
    code = int.from_bytes(data[18:20], "little" if data[5] == 1 else "big")
    return ELF_MACHINES.get(code, f"e_machine {code:#x}")


def parse_arch(text: str) -> Arch | None:
    """The wrapper's line in TEXT (stdout), or None when it is not there."""
    for line in text.splitlines():
        parts = line.split()
        if parts and parts[0] == ARCH_MARKER and len(parts) >= 2:
            return Arch(parts[1], elf_machine(parts[2]) if len(parts) > 2 else None)
    return None
