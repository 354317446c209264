"""Waiting helpers for tests (a condition or an HTTP endpoint, always with a timeout), and ports for the servers
that cannot bind port 0 themselves: reserved below the kernel's ephemeral range through lock files, so that no
other process (another test, another pytest session) can take one between its choice and its bind."""

from __future__ import annotations

import atexit
import os
import random
import socket
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import requests


def wait_for(
    condition: Callable[[], object], *, timeout: float, what: str, detail: Callable[[], str] | None = None,
    interval: float = 0.1,
) -> None:
    """Poll CONDITION until it is true; after TIMEOUT seconds fail naming WHAT (and DETAIL(), e.g. log tails)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}" + (f"\n{detail()}" if detail else ""))
        time.sleep(interval)


LOCK_DIR = Path(tempfile.gettempdir()) / "pdctl-test-ports"
_held: list[Path] = []


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for port-0 binds and outgoing connections (ports it may hand out at any time)."""
    try:
        low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
        return int(low), int(high)
    except (OSError, ValueError):
        return 32768, 60999


def _reservable_ports() -> range:
    """Ports below the ephemeral range: the kernel never hands them out by itself, so only processes that
    bind them by number compete for them, and every pdctl test process takes them through a lock file."""
    low, _ = _ephemeral_range()
    return range(max(1024, low - 12000), low)


def _lock(port: int) -> bool:
    """Take PORT's lock file (O_EXCL), or take over a lock whose owner process has exited."""
    LOCK_DIR.mkdir(parents=True, exist_ok=True)
    path = LOCK_DIR / str(port)
    for _ in range(2):
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            try:
                owner = int(path.read_text() or 0)
            except (OSError, ValueError):
                return False
            if owner and Path(f"/proc/{owner}").exists():
                return False
            path.unlink(missing_ok=True)  # its owner is gone: a stale lock
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        _held.append(path)
        return True
    return False


@atexit.register
def _release_all() -> None:
    for path in _held:
        path.unlink(missing_ok=True)


def free_port() -> int:
    """A TCP port reserved for this test process until it exits: free on 127.0.0.1 now, and no other
    process can be handed it meanwhile. For servers whose port must be chosen before they start (the router,
    the ports of a launched topology); servers that can bind port 0 and report it do that instead."""
    ports = _reservable_ports()
    rng = random.Random()
    for _ in range(2000):
        port = rng.choice(ports)
        if not _lock(port):
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
                return port
            except OSError:  # used by something outside the tests (a fixed-port service): keep it locked
                continue
    raise RuntimeError(f"no free port in {ports.start}..{ports.stop - 1} (locks in {LOCK_DIR})")


def wait_http_ok(
    url: str,
    timeout: float = 60.0,
    proc=None,
    *,
    post_json: dict | None = None,
    request_timeout: float = 2.0,
    interval: float = 0.2,
) -> None:
    """Poll URL until it answers 200; fail after TIMEOUT seconds, or at once if PROC (a Popen) exited.

    With POST_JSON the probe is a POST of that body (e.g. a one-token /generate, to know a router really
    routes to a healthy worker rather than only that it listens).
    """
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"process exited with {proc.returncode} before {url} was healthy")
        try:
            if post_json is None:
                r = requests.get(url, timeout=request_timeout)
            else:
                r = requests.post(url, json=post_json, timeout=request_timeout)
            if r.status_code == 200:
                return
            last = f"HTTP {r.status_code}: {r.text[:200]}"
        except requests.RequestException as exc:
            last = str(exc)
        time.sleep(interval)
    raise TimeoutError(f"{url} not healthy after {timeout}s: {last}")
