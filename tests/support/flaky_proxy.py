"""A real HTTP proxy that injects faults in front of a real server: 500s, dropped connections, stalls.

Why a proxy and not a fake server: the eval must survive what a real deployment does to it — a router that
answers 500, a worker that dies mid-request — while every request that does get through is answered by the real
engine. Faults are chosen per question (by a substring of the prompt's last question), so a test knows exactly
which items must end as errors, which must recover on retry, and how many requests each received.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

import requests


@dataclass
class Faults:
    """Which prompts get which fault. Matching is on the prompt's last 'Question: ...' (the asked one)."""

    always_500: set[str] = field(default_factory=set)
    always_drop: set[str] = field(default_factory=set)
    first_500: set[str] = field(default_factory=set)  # first attempt 500, later ones pass
    first_drop: set[str] = field(default_factory=set)
    stall_s: float = 0.0
    stall: set[str] = field(default_factory=set)  # sleep stall_s before answering (client timeouts)
    hidden: set[str] = field(default_factory=set)  # GET paths answered 404 (a gateway exposing only serving paths)


def _asked(body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        doc = json.loads(text)
        text = doc.get("text") or doc.get("prompt") or (doc.get("messages") or [{}])[-1].get("content") or text
    except (ValueError, AttributeError):
        pass
    cut = text.rfind("Question: ")
    return text[cut:] if cut >= 0 else text


class _QuietServer(ThreadingHTTPServer):
    """A client that timed out and hung up is expected here: no traceback for it; and closing does not wait
    for handlers still stalling (they are daemon threads that end with the test process)."""

    block_on_close = False

    def handle_error(self, request: object, client_address: object) -> None:
        pass


class FlakyProxy:
    """Forward every request to UPSTREAM except those FAULTS picks; count what was received, per question."""

    def __init__(self, upstream: str, faults: Faults | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.faults = faults or Faults()
        self.received: Counter[str] = Counter()  # asked-question text -> POSTs received
        self.injected: Counter[str] = Counter()  # fault kind -> count
        self._lock = threading.Lock()
        self._server = _QuietServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def count(self, needle: str) -> int:
        """POSTs received whose asked question contains NEEDLE."""
        with self._lock:
            return sum(n for asked, n in self.received.items() if needle in asked)

    def _fault(self, asked: str, attempt: int) -> str | None:
        f = self.faults

        def hit(needles: set[str]) -> bool:
            return any(n in asked for n in needles)

        if hit(f.always_500) or (attempt == 1 and hit(f.first_500)):
            return "500"
        if hit(f.always_drop) or (attempt == 1 and hit(f.first_drop)):
            return "drop"
        if f.stall_s and hit(f.stall):
            return "stall"
        return None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _forward(self, method: str, body: bytes | None) -> None:
                try:
                    resp = requests.request(method, proxy.upstream + self.path, data=body, timeout=120,
                                            headers={"Content-Type": self.headers.get("Content-Type", "")})
                    status, payload, ctype = resp.status_code, resp.content, resp.headers.get("Content-Type", "")
                except requests.RequestException as exc:
                    status, payload, ctype = 502, str(exc).encode(), "text/plain"
                self._reply(status, payload, ctype or "application/json")

            def _reply(self, status: int, payload: bytes, ctype: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                if self.path.split("?")[0] in proxy.faults.hidden:
                    self._reply(404, b'{"error": "not exposed"}', "application/json")
                    return
                self._forward("GET", None)

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                asked = _asked(body)
                with proxy._lock:
                    proxy.received[asked] += 1
                    attempt = proxy.received[asked]
                fault = proxy._fault(asked, attempt)
                if fault:
                    with proxy._lock:
                        proxy.injected[fault] += 1
                if fault == "500":
                    self._reply(500, b'{"error": "injected fault"}', "application/json")
                    return
                if fault == "drop":  # the connection dies with no response at all
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                if fault == "stall":
                    time.sleep(proxy.faults.stall_s)
                self._forward("POST", body)

        return Handler
