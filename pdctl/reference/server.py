"""The reference engine's server process: bind the port, build the engine, serve its app with uvicorn.

The routes live in pdctl.reference.http (handlers parse, submit to the scheduler's engine thread and await
the result on the event loop; they never run model code themselves). SIGTERM/SIGINT shut down cleanly: the
app's lifespan stops the engine thread and the role, and the process exits 0.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from pdctl.errors import PdctlError, UserError
from pdctl.reference.args import ServerArgs, parse_args
from pdctl.reference.engine import build_engine
from pdctl.reference.http.app import create_app

log = logging.getLogger("pdctl.reference.server")


def _server_class() -> type:
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn, but SIGTERM/SIGINT end in exit status 0 after a graceful shutdown (no re-raise), and once
        it serves (engine and role started) its bound ports are written to `port_file` when one is set."""

        port_file: str | None = None
        ports: dict[str, int] | None = None
        role: Any = None

        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            def handler(sig: int, frame: Any) -> None:
                log.info("received signal %d, shutting down", sig)
                self.should_exit = True

            old = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
            try:
                yield
            finally:
                for s, h in old.items():
                    signal.signal(s, h)

        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets=sockets)
            ports = dict(self.ports or {})
            bootstrap = getattr(self.role, "bootstrap_port", None)  # prefill: bound by role.start()
            if bootstrap is not None:
                ports["bootstrap_port"] = int(bootstrap)
            if self.port_file and not self.should_exit:
                write_port_file(self.port_file, ports)

    return Server


# The first bytes of an HTTP/2 "prior knowledge" connection (gRPC over cleartext).
H2_PREFACE = b"PRI * HTTP/2.0"


def _http_protocol() -> type:
    """uvicorn's HTTP/1.1 protocol, closing an HTTP/2 prior-knowledge connection quietly.

    Who sends one: sglang-router (0.3.x) decides per worker whether it speaks HTTP or gRPC by trying both at
    registration (its detect_connection_mode step opens a gRPC, i.e. HTTP/2, connection next to the HTTP
    health check), and has no flag to skip that. uvicorn answers the HTTP/2 preface with a 400 and a
    `WARNING: Invalid HTTP request received.` in every worker's log right after launch, which reads like a
    fault. The reference engine speaks HTTP/1.1 only, so it closes such a connection (the router then takes
    the HTTP answer) and logs it at debug level. (SGLang's own servers still log the warning: harmless.)"""
    from uvicorn.protocols.http.auto import AutoHTTPProtocol

    class Http1Only(AutoHTTPProtocol):  # type: ignore[misc,valid-type]
        _first_data = True

        def data_received(self, data: bytes) -> None:
            if self._first_data:
                self._first_data = False
                if data.startswith(H2_PREFACE):
                    log.debug("closed an HTTP/2 (gRPC) connection from %s: a router detecting the protocol; "
                              "this server speaks HTTP/1.1", getattr(self, "client", None))
                    self.transport.close()
                    return
            super().data_received(data)

    return Http1Only


def write_port_file(path: str, ports: dict[str, int]) -> None:
    """Write the bound ports (+ pid) as JSON, atomically: the ready signal for whoever started the server
    with --port 0 (a reader never sees half a file)."""
    import os

    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        json.dump({**ports, "pid": os.getpid()}, f)
    os.replace(tmp, path)


def bind_socket(host: str, port: int) -> Any:
    """Bind the HTTP socket here rather than in uvicorn, so that --port 0 yields a port we can report."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UserError(f"cannot bind the HTTP server on {host}:{port}: {exc}") from exc
    sock.listen(2048)
    return sock


def serve(args: ServerArgs) -> None:
    """Bind the HTTP port, build the engine and serve until SIGTERM/SIGINT."""
    import uvicorn

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.ignored:
        log.warning("ignoring flags the reference engine does not use: %s", " ".join(args.ignored))
    sock = bind_socket(args.host, args.port)
    engine = build_engine(args)
    try:  # the role binds its ports and registers memory: a failure is the user's to fix (exit 2), no traceback
        engine.role.start()
    except BaseException:
        engine.role.shutdown()
        sock.close()
        raise
    config = uvicorn.Config(create_app(engine, role_started=True), log_level=args.log_level.lower(),
                            access_log=False, timeout_graceful_shutdown=5, http=_http_protocol())
    server = _server_class()(config)
    server.port_file, server.role = args.port_file, engine.role
    server.ports = {"port": int(sock.getsockname()[1])}
    log.info("HTTP server on %s:%d", args.host, server.ports["port"])
    server.run(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    """`python -m pdctl.reference ...`: exit 2 with a message on bad input, never a traceback."""
    args = parse_args(argv)
    try:
        serve(args)
    except PdctlError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    return 0
