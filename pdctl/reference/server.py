"""The reference engine's HTTP server (FastAPI + uvicorn), SGLang's endpoints and response shapes.

Handlers parse, submit to the scheduler's engine thread and await the result on the event loop; they never
run model code themselves. SIGTERM (uvicorn's handler) shuts down cleanly: the lifespan hook stops the
engine thread and the role.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from collections.abc import Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from pdctl import __version__
from pdctl.reference.api import ApiError, error_body, generate_response, parse_generate
from pdctl.reference.args import ServerArgs, parse_args
from pdctl.reference.engine import Engine, build_engine
from pdctl.reference.openai_api import chat_response, completion_response, parse_completion
from pdctl.reference.request import GenRequest
from pdctl.reference.roles.base import RequestInfo
from pdctl.reference.sampling import SamplingParams

log = logging.getLogger("pdctl.reference.server")
REQUEST_TIMEOUT_S = 600.0


async def _run(engine: Engine, reqs: list[GenRequest]) -> list[GenRequest]:
    """Submit REQS to the engine thread and wait (bounded) for all of them."""
    loop = asyncio.get_running_loop()
    futures = []
    for req in reqs:
        fut: asyncio.Future[GenRequest] = loop.create_future()

        def done(r: GenRequest, f: asyncio.Future[GenRequest] = fut) -> None:
            loop.call_soon_threadsafe(lambda: f.done() or f.set_result(r))

        req.on_done = done
        futures.append(fut)
        engine.scheduler.submit(req)
    return list(await asyncio.wait_for(asyncio.gather(*futures), timeout=REQUEST_TIMEOUT_S))


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse(error_body(message, status), status_code=status)


async def _json(request: Request) -> Any:
    raw = await request.body()
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"malformed JSON body: {exc}") from exc


def _failed(reqs: list[GenRequest]) -> JSONResponse | None:
    for r in reqs:
        if r.error is not None:
            return _error(r.error, r.error_status)
    return None


def _sse(doc: Any) -> StreamingResponse:
    async def gen() -> Any:
        yield f"data: {json.dumps(doc)}\n\n"
        yield "data: [DONE]\n\n"

    return StreamingResponse(gen(), media_type="text/event-stream")


def _abort_pd_room(engine: Engine, body: Any, message: str) -> None:
    """A PD half rejected a request before scheduling it: tell the peer now, so it does not wait for a timeout."""
    if engine.args.role == "colocated" or not isinstance(body, dict) or body.get("bootstrap_room") is None:
        return
    try:
        info = RequestInfo(rid=str(body.get("rid") or "rejected"), input_ids=[],
                           bootstrap_host=body.get("bootstrap_host"), bootstrap_port=int(body["bootstrap_port"])
                           if body.get("bootstrap_port") is not None else None,
                           bootstrap_room=int(body["bootstrap_room"]))
    except (TypeError, ValueError):
        return
    engine.role.abort_request(info, message)


def create_app(engine: Engine, *, role_started: bool = False) -> FastAPI:
    """The FastAPI app serving ENGINE: the engine thread starts/stops with the app's lifespan, and so does the
    role unless ROLE_STARTED (`serve` starts it before serving, so that a failure there is a clean exit 2)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        if not role_started:
            engine.role.start()
        engine.scheduler.start()
        log.info("reference engine ready: role=%s tp=%d page_size=%d", engine.args.role, engine.args.tp,
                 engine.args.page_size)
        try:
            yield
        finally:
            log.info("shutting down")
            engine.scheduler.stop()
            engine.role.shutdown()

    app = FastAPI(lifespan=lifespan)
    is_prefill = engine.args.role == "prefill"
    is_decode = engine.args.role == "decode"

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return _error(exc.message, exc.status)

    @app.exception_handler(TimeoutError)
    async def _timeout(request: Request, exc: TimeoutError) -> JSONResponse:
        return _error(f"request did not finish within {REQUEST_TIMEOUT_S:.0f} s", 504)

    @app.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @app.get("/health_generate")
    async def health_generate() -> Response:
        if is_prefill or is_decode:  # a PD half cannot generate alone
            return Response(status_code=200)
        req = GenRequest(rid="health", input_ids=[256, 104], sampling=SamplingParams(max_new_tokens=1, temperature=0))
        (done,) = await _run(engine, [req])
        return Response(status_code=200 if done.error is None else 503)

    @app.post("/generate")
    async def generate(request: Request) -> Response:
        body = await _json(request)
        try:
            reqs, batch = parse_generate(body, engine.context_length)
        except ApiError as exc:
            _abort_pd_room(engine, body, exc.message)
            raise
        done = await _run(engine, reqs)
        bad = _failed(done)
        if bad is not None:
            return bad
        docs = [generate_response(r, input_logprobs=not is_decode) for r in done]
        out: Any = docs if batch else docs[0]
        return _sse(out) if isinstance(body, dict) and body.get("stream") else JSONResponse(out)

    async def _openai(request: Request, chat: bool) -> Response:
        body = await _json(request)
        req = parse_completion(body, engine.context_length, chat)
        (done,) = await _run(engine, [req])
        bad = _failed([done])
        if bad is not None:
            return bad
        doc = (chat_response if chat else completion_response)(done, engine.model_name)
        return _sse(doc) if body.get("stream") else JSONResponse(doc)

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await _openai(request, chat=False)

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await _openai(request, chat=True)

    @app.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": engine.model_name, "object": "model", "created": 0,
                                            "owned_by": "pdctl", "root": engine.model_name,
                                            "max_model_len": engine.context_length}]}

    @app.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache() -> Response:
        pages = await asyncio.to_thread(engine.scheduler.flush_cache)
        return Response(f"Cache flushed ({pages} pages).\n", status_code=200)

    def server_info() -> dict[str, Any]:
        a = engine.args
        doc = {k: v for k, v in vars(a).items() if k != "ignored"}
        doc.update({
            "version": f"pdctl-reference-{__version__}", "engine": "pdctl-reference",
            "tp_size": a.tp, "dp_size": 1, "pp_size": 1, "disaggregation_mode": "null" if a.role == "colocated" else a.role,
            "context_length": engine.context_length, "max_total_num_tokens": a.max_total_tokens,
            "kv_heads_per_rank": engine.model.shards[0].kv_heads,
            "internal_states": [engine.scheduler.stats()],
        })
        return doc

    def model_info() -> dict[str, Any]:
        return {"model_path": engine.args.model_path, "tokenizer_path": engine.args.model_path,
                "served_model_name": engine.model_name, "is_generation": True,
                "preferred_sampling_params": None, "weight_version": "default",
                "has_image_understanding": False, "has_audio_understanding": False, "model_type": "pdctl-reference",
                "architectures": ["PdctlReferenceForCausalLM"]}

    for path in ("/server_info", "/get_server_info"):
        app.add_api_route(path, server_info, methods=["GET"])
    for path in ("/model_info", "/get_model_info"):
        app.add_api_route(path, model_info, methods=["GET"])
    return app


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

    from pdctl.errors import UserError

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
                            access_log=False, timeout_graceful_shutdown=5)
    server = _server_class()(config)
    server.port_file, server.role = args.port_file, engine.role
    server.ports = {"port": int(sock.getsockname()[1])}
    log.info("HTTP server on %s:%d", args.host, server.ports["port"])
    server.run(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    """`python -m pdctl.reference ...`: exit 2 with a message on bad input, never a traceback."""
    from pdctl.errors import PdctlError

    args = parse_args(argv)
    try:
        serve(args)
    except PdctlError as exc:
        print(f"error: {exc.message}", file=sys.stderr)
        return exc.exit_code
    return 0
