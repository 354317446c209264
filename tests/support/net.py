"""Network helpers for tests: free loopback ports, waiting for HTTP health with a timeout."""

from __future__ import annotations

import socket
import time

import requests


def free_port() -> int:
    """A TCP port that is free on 127.0.0.1 right now (tests never use fixed ports)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
