"""A real HTTP proxy that streams a real deployment's answers through unchanged, but late: a deliberately slowed
candidate for `pdctl bench serve`'s regression gate.

Why a proxy and not a fake server: the gate must catch a slower deployment whose every answer is still a real
one (same tokens, same counts), as a real regression looks. The proxy forwards each request to UPSTREAM, waits
`delay_s` before sending the response head (so TTFT and E2E grow by at least that much) and `chunk_delay_s`
before each later chunk of a streamed body (so ITL grows), and passes server-sent events through as they
arrive (chunked), one read per event. Loopback only; daemon threads end with the test.

Faults a real deployment's front can have, for bench serve's sanity checks: `rewrite` changes each POST
body before it goes upstream, `answer` each POST's whole answer before it goes back (e.g. the generated text
dropped: the client then receives no token), and `duplicate` sends each POST upstream twice (a retrying
front) and answers with the second: the servers then count twice what the client saw.
"""

from __future__ import annotations

import http.client
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from urllib.parse import urlsplit

from tests.support.flaky_proxy import FlakyProxy


class SlowProxy(FlakyProxy):
    """Forward everything to UPSTREAM; answers start DELAY_S late, streamed chunks CHUNK_DELAY_S apart.
    (FlakyProxy's server and lifecycle, with a streaming handler of its own; it injects no faults.)"""

    def __init__(self, upstream: str, *, delay_s: float = 0.0, chunk_delay_s: float = 0.0,
                 rewrite: Callable[[bytes], bytes] | None = None, answer: Callable[[bytes], bytes] | None = None,
                 duplicate: bool = False) -> None:
        parts = urlsplit(upstream)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self.delay_s, self.chunk_delay_s = delay_s, chunk_delay_s
        self.rewrite, self.answer, self.duplicate = rewrite, answer, duplicate
        self.requests = 0
        super().__init__(upstream)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0) or 0)) if method == "POST" else None
                if body is not None and proxy.rewrite is not None:
                    body = proxy.rewrite(body)
                with proxy._lock:
                    proxy.requests += 1
                headers = {"Content-Type": self.headers.get("Content-Type", "application/json")}
                if body is not None and proxy.duplicate:
                    extra = http.client.HTTPConnection(proxy.host, proxy.port, timeout=600)
                    try:
                        extra.request(method, self.path, body=body, headers=headers)
                        extra.getresponse().read()
                    except OSError:
                        pass
                    finally:
                        extra.close()
                conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=600)
                try:
                    conn.request(method, self.path, body=body, headers=headers)
                    resp = conn.getresponse()
                    if method == "POST" and proxy.delay_s:
                        time.sleep(proxy.delay_s)
                    self.send_response(resp.status)
                    self.send_header("Content-Type", resp.getheader("Content-Type", "application/json"))
                    self.send_header("Transfer-Encoding", "chunked")
                    self.end_headers()
                    first = True
                    if method == "POST" and proxy.answer is not None:
                        whole = proxy.answer(resp.read())
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(whole), whole))
                    while True:
                        data = resp.read1(65536)
                        if not data:
                            break
                        if not first and proxy.chunk_delay_s:
                            time.sleep(proxy.chunk_delay_s)
                        first = False
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    self.wfile.flush()
                except OSError:
                    self.close_connection = True
                finally:
                    conn.close()

            def do_GET(self) -> None:
                self._forward("GET")

            def do_POST(self) -> None:
                self._forward("POST")

        return Handler
