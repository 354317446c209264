"""NIXL and Mooncake for real, across processes: scattered WRITE lists land byte-exact, notifications arrive."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from pdctl.transfer.backends import TransferError, create_backend, flatten_blocks

pytestmark = pytest.mark.e2e  # real transfer backends

NBYTES = 1 << 20


def _line(proc: subprocess.Popen) -> dict:
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith("@@"):
            return json.loads(line[2:])
    raise AssertionError(f"peer exited with {proc.wait()} without answering")


@pytest.fixture
def peer(request):
    procs = []

    def start(kind: str, notes: int) -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.support.transfer_peer", kind, str(NBYTES), str(notes)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        procs.append(proc)
        return proc

    yield start
    for proc in procs:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)


# Mooncake's cross-process bytes (and batches above its default queue depth) are covered by
# test_bench_cli.py's Mooncake run; here the error path is exercised on NIXL to keep the directory fast.
@pytest.mark.parametrize("kind", ["nixl"])
def test_cross_process_scattered_write_is_byte_exact_and_errors_are_reported(kind, peer):
    proc = peer(kind, notes=2)
    hello = _line(proc)
    src = np.random.default_rng(1).integers(0, 256, NBYTES, dtype=np.uint8)
    backend = create_backend(kind, "test-src")
    backend.register([(int(src.ctypes.data), NBYTES)])
    name = backend.connect(hello["metadata"])
    # 40k descriptors of 12 bytes (more than Mooncake's default per-peer queue), scattered with a stride,
    # mirroring per-token head slices; the rest of the peer's buffer must stay zero.
    n, length, stride = 40_000, 12, 24
    offsets = np.arange(n, dtype=np.uint64) * np.uint64(stride)
    blocks = [(np.uint64(src.ctypes.data) + offsets, np.uint64(hello["addr"]) + offsets[::-1].copy(), length)]
    s, d, lens = flatten_blocks(blocks)
    backend.wait(backend.write(name, s, d, lens, notify=b"kv 7 0 ok"), timeout=30)
    # A write outside the peer's registered memory is an error, not a hang or a crash...
    bogus = np.asarray([hello["addr"] + 64 * NBYTES], dtype=np.uint64)
    with pytest.raises(TransferError):
        one = np.asarray([src.ctypes.data], np.uint64)
        backend.wait(backend.write(name, one, bogus, np.asarray([64], np.uint64)), timeout=10)
    backend.notify(name, b"bye")  # ...and the endpoint stays usable afterwards
    done = _line(proc)
    expected = np.zeros(NBYTES, dtype=np.uint8)
    for i in range(n):
        o_src, o_dst = i * stride, (n - 1 - i) * stride
        expected[o_dst : o_dst + length] = src[o_src : o_src + length]
    assert sorted(done["notes"]) == sorted(["kv 7 0 ok", "bye"])
    assert done["sha256"] == hashlib.sha256(expected.tobytes()).hexdigest()
    assert done["nonzero"] == int(np.count_nonzero(expected))
    backend.close()
