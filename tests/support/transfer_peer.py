"""A receiving endpoint in its own process, for the cross-process backend tests.

`python -m tests.support.transfer_peer BACKEND NBYTES NOTES`: allocates NBYTES of zeroed host memory, registers
it, prints one JSON line {"metadata", "addr"}, waits (20 s at most) for NOTES notifications, then prints
{"notes": [...], "sha256": hex of the buffer, "nonzero": count} and exits.
"""

from __future__ import annotations

import hashlib
import json
import sys
import time

import numpy as np

from pdctl.transfer.backends import create_backend


def main() -> int:
    kind, nbytes, want = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    backend = create_backend(kind, "test-peer")
    buf = np.zeros(nbytes, dtype=np.uint8)
    backend.register([(int(buf.ctypes.data), nbytes)])
    print("@@" + json.dumps({"metadata": backend.metadata(), "addr": int(buf.ctypes.data)}), flush=True)
    notes: list[str] = []
    deadline = time.monotonic() + 20
    while len(notes) < want and time.monotonic() < deadline:
        notes += [n.message.decode() for n in backend.poll()]
        time.sleep(0.002)
    digest = hashlib.sha256(buf.tobytes()).hexdigest()
    print(
        "@@" + json.dumps({"notes": notes, "sha256": digest, "nonzero": int(np.count_nonzero(buf))}),
        flush=True,
    )
    backend.close()
    return 0


if __name__ == "__main__":
    from pdctl.procexit import run_and_exit

    run_and_exit(main)  # a process that created a NIXL agent ends through procexit (NIXL crashes at exit)
