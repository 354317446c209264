"""The prefill side's bootstrap HTTP server and the decode side's client (SGLang's PD control plane).

Why HTTP on `--disaggregation-bootstrap-port`: the router tells decode where the prefill is only through the
request body (`bootstrap_host`, `bootstrap_port`, `bootstrap_room`); decode then talks to that port. Data never
goes through here — only who-is-where (server info, backend metadata, buffer addresses) and, per room, the
destination pages. Routes:
  GET  /health          liveness (SGLang's decode probes it)
  GET  /route           the prefill's ServerInfo (what SGLang's decode fetches before its sanity checks)
  POST /register        one decode rank's registration; 400 {"error": msg} when the handshake rejects it
  POST /room            one request's destination pages (or {"abort": msg}) for all decode ranks
  POST /liveness        decode's heartbeat: {"rooms": [...]} the decode holds -> {"held": [...]} the prefill holds
stdlib only (http.server): the server must start in milliseconds and add no dependency.

Liveness tolerates slowness (pdctl.reference.roles.liveness): the client tells a peer that does not answer in
time ("slow": a loaded machine, a descheduled process) from one that refuses the connection ("dead": the
process is gone), and only the latter fails requests fast. A client that gave up waiting closes its socket;
the server then drops the answer quietly instead of printing a BrokenPipe traceback.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

from pdctl.errors import UserError
from pdctl.reference.roles.liveness import DEAD, SLOW, classify

Handler = Callable[[dict[str, Any]], "str | None"]
Query = Callable[[dict[str, Any]], dict[str, Any]]
log = logging.getLogger("pdctl.reference.roles")
CONNECT_TIMEOUT_S = 3.0  # a connect takes this long only when the peer's host is unreachable or very loaded


class _QuietServer(ThreadingHTTPServer):
    """A client that timed out and left is not an error worth a traceback (the answer has nowhere to go)."""

    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)):
            log.debug("bootstrap client %s went away before its answer: %s", client_address, exc)
            return
        super().handle_error(request, client_address)


class BootstrapServer:
    """Threaded HTTP server; `on_register` returns an error message (rejection) or None; `on_room` stores."""

    def __init__(
        self, host: str, port: int, info: dict[str, Any], on_register: Handler, on_room: Handler,
        on_liveness: Query | None = None,
    ) -> None:
        self.info = info
        server = self

        class _H(BaseHTTPRequestHandler):
            def log_message(self, fmt: str, *args: Any) -> None:  # quiet: the engine logs what matters
                return

            def _send(self, code: int, doc: dict[str, Any]) -> None:
                body = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self) -> None:
                if self.path.startswith("/health"):
                    self._send(200, {"ok": True})
                elif self.path.startswith("/route"):
                    self._send(200, server.info)
                else:
                    self._send(404, {"error": f"unknown path {self.path}"})

            def do_POST(self) -> None:
                try:
                    length = int(self.headers.get("Content-Length") or 0)
                    doc = json.loads(self.rfile.read(length) or b"{}")
                except (ValueError, json.JSONDecodeError) as exc:
                    self._send(400, {"error": f"bad JSON: {exc}"})
                    return
                if self.path == "/liveness" and on_liveness is not None:
                    self._send(200, on_liveness(doc))
                    return
                handler = {"/register": on_register, "/room": on_room}.get(self.path)
                if handler is None:
                    self._send(404, {"error": f"unknown path {self.path}"})
                    return
                try:
                    error = handler(doc)
                except Exception as exc:  # noqa: BLE001 - a bad registration must not kill the server
                    error = f"{type(exc).__name__}: {exc}"
                self._send(400 if error else 200, {"error": error} if error else {"ok": True})

        try:
            self.httpd = _QuietServer((host, port), _H)
        except OSError as exc:
            raise UserError(f"cannot bind the bootstrap server on {host}:{port}: {exc}") from exc
        self.port = int(self.httpd.server_address[1])  # the bound port (port 0 picks a free one)
        self._thread = threading.Thread(target=self.httpd.serve_forever, name="bootstrap", daemon=True)

    def start(self) -> None:
        """Serve in a background thread."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving and close the socket."""
        self.httpd.shutdown()
        self.httpd.server_close()


class BootstrapError(RuntimeError):
    """The prefill's bootstrap server refused (handshake) or could not be reached."""


class PeerGone(BootstrapError):
    """The prefill's bootstrap port refuses connections: the process is gone (not merely slow)."""


def _url(addr: str, path: str) -> str:
    return f"http://{addr}{path}"


def _request(method: str, addr: str, path: str, doc: dict[str, Any] | None, *, timeout: float,
             wait: float) -> requests.Response:
    """One request to the bootstrap server, retried while it is merely slow for up to WAIT seconds.

    A refused connection raises PeerGone at once; a peer that stays slow past WAIT raises BootstrapError.
    Retrying is safe: every route is idempotent (a room document or a registration replaces itself).
    """
    deadline = time.monotonic() + wait
    attempt = 0
    while True:
        attempt += 1
        try:
            return requests.request(method, _url(addr, path), json=doc, timeout=(CONNECT_TIMEOUT_S, timeout))
        except requests.RequestException as exc:
            if classify(exc) == DEAD:
                raise PeerGone(f"prefill bootstrap server {addr} is unreachable (connection refused: the prefill "
                               f"process is gone): {exc}") from exc
            if time.monotonic() + timeout > deadline:
                raise BootstrapError(f"prefill bootstrap server {addr} did not answer {path} within {wait:g}s "
                                     f"({attempt} attempts; overloaded or hung): {exc}") from exc
            log.warning("prefill bootstrap server %s is slow to answer %s (attempt %d): %s", addr, path, attempt, exc)


def get_route(addr: str, timeout: float = 5.0, wait: float = 30.0) -> dict[str, Any]:
    """The prefill's ServerInfo; a dead prefill raises PeerGone, one slow past WAIT seconds BootstrapError."""
    r = _request("GET", addr, "/route", None, timeout=timeout, wait=wait)
    if r.status_code != 200:
        raise BootstrapError(f"prefill bootstrap server {addr} answered HTTP {r.status_code}: {r.text[:200]}")
    return r.json()


def post(addr: str, path: str, doc: dict[str, Any], timeout: float = 10.0, wait: float = 30.0) -> None:
    """POST a document; a 400 carries the prefill's error message (e.g. the handshake rejection)."""
    r = _request("POST", addr, path, doc, timeout=timeout, wait=wait)
    if r.status_code != 200:
        try:
            msg = r.json().get("error") or r.text
        except ValueError:
            msg = r.text
        raise BootstrapError(str(msg))


def liveness(addr: str, rooms: list[int], decode_id: str, timeout: float = 3.0) -> dict[str, Any] | str:
    """One heartbeat: the prefill's answer ({"held": [...]}), or SLOW (no answer in time) or DEAD (refused)."""
    try:
        r = requests.post(_url(addr, "/liveness"), json={"rooms": rooms, "decode_id": decode_id},
                          timeout=(CONNECT_TIMEOUT_S, timeout))
    except requests.RequestException as exc:
        return classify(exc)
    if r.status_code != 200:
        return SLOW  # answering, but not this route: alive
    try:
        doc = r.json()
    except ValueError:
        return SLOW
    return doc if isinstance(doc, dict) else SLOW
