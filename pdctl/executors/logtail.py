"""Reading the end of a log file without reading all of it (logs of long runs get large)."""

from __future__ import annotations

from pathlib import Path


def tail_lines(path: Path, n: int, *, max_bytes: int = 1 << 20) -> str:
    """The last N lines of PATH ('' if it does not exist); reads at most MAX_BYTES from the end."""
    if n <= 0 or not path.exists():
        return ""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        fh.seek(max(0, size - max_bytes))
        data = fh.read()
    lines = data.decode("utf-8", "replace").splitlines()
    return "\n".join(lines[-n:])
