"""The prefill side's bootstrap HTTP server and the decode side's client (SGLang's PD control plane).

Why HTTP on `--disaggregation-bootstrap-port`: the router tells decode where the prefill is only through the
request body (`bootstrap_host`, `bootstrap_port`, `bootstrap_room`); decode then talks to that port. Data never
goes through here — only who-is-where (server info, backend metadata, buffer addresses) and, per room, the
destination pages. Routes:
  GET  /health          liveness (decode's watchdog uses it to report a dead prefill)
  GET  /route           the prefill's ServerInfo (what SGLang's decode fetches before its sanity checks)
  POST /register        one decode rank's registration; 400 {"error": msg} when the handshake rejects it
  POST /room            one request's destination pages (or {"abort": msg}) for all decode ranks
stdlib only (http.server): the server must start in milliseconds and add no dependency.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import requests

Handler = Callable[[dict[str, Any]], "str | None"]


class BootstrapServer:
    """Threaded HTTP server; `on_register` returns an error message (rejection) or None; `on_room` stores."""

    def __init__(
        self, host: str, port: int, info: dict[str, Any], on_register: Handler, on_room: Handler
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
            self.httpd = ThreadingHTTPServer((host, port), _H)
        except OSError as exc:
            from pdctl.errors import UserError

            raise UserError(f"cannot bind the bootstrap server on {host}:{port}: {exc}") from exc
        self.httpd.daemon_threads = True
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


def _url(addr: str, path: str) -> str:
    return f"http://{addr}{path}"


def get_route(addr: str, timeout: float = 5.0) -> dict[str, Any]:
    """The prefill's ServerInfo; unreachable -> BootstrapError naming the address."""
    try:
        r = requests.get(_url(addr, "/route"), timeout=timeout)
    except requests.RequestException as exc:
        raise BootstrapError(f"prefill bootstrap server {addr} is unreachable: {exc}") from exc
    if r.status_code != 200:
        raise BootstrapError(f"prefill bootstrap server {addr} answered HTTP {r.status_code}: {r.text[:200]}")
    return r.json()


def post(addr: str, path: str, doc: dict[str, Any], timeout: float = 10.0) -> None:
    """POST a document; a 400 carries the prefill's error message (e.g. the handshake rejection)."""
    try:
        r = requests.post(_url(addr, path), json=doc, timeout=timeout)
    except requests.RequestException as exc:
        raise BootstrapError(f"prefill bootstrap server {addr} is unreachable: {exc}") from exc
    if r.status_code != 200:
        try:
            msg = r.json().get("error") or r.text
        except ValueError:
            msg = r.text
        raise BootstrapError(str(msg))


def alive(addr: str, timeout: float = 2.0) -> bool:
    """Whether the bootstrap server answers /health (a dead prefill process does not)."""
    try:
        return requests.get(_url(addr, "/health"), timeout=timeout).status_code == 200
    except requests.RequestException:
        return False
