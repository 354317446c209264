"""The FastAPI app of a reference engine: its lifespan (engine thread and role) and its route groups."""

from __future__ import annotations

import logging
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse

from pdctl.reference.http import admin, generate, metrics
from pdctl.reference.http.bridge import REQUEST_TIMEOUT_S
from pdctl.reference.http.sglang_api import ApiError

log = logging.getLogger("pdctl.reference.server")


def create_app(engine: Any, *, role_started: bool = False) -> FastAPI:
    """The app serving ENGINE: the engine thread starts/stops with the app's lifespan, and so does the role
    unless ROLE_STARTED (`serve` starts it before serving, so that a failure there is a clean exit 2)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> Any:
        if not role_started:
            engine.role.start()
        engine.scheduler.start()
        log.info("reference engine ready: role=%s tp=%d page_size=%d numerics=%s", engine.args.role,
                 engine.args.tp, engine.args.page_size, engine.args.numerics)
        try:
            yield
        finally:
            log.info("shutting down")
            engine.scheduler.stop()
            engine.role.shutdown()

    app = FastAPI(lifespan=lifespan)

    @app.exception_handler(ApiError)
    async def _api_error(request: Request, exc: ApiError) -> JSONResponse:
        return generate.error_response(exc.message, exc.status)

    @app.exception_handler(TimeoutError)
    async def _timeout(request: Request, exc: TimeoutError) -> JSONResponse:
        return generate.error_response(f"request did not finish within {REQUEST_TIMEOUT_S:.0f} s", 504)

    app.include_router(admin.make_router(engine))
    app.include_router(generate.make_router(engine))
    app.include_router(metrics.make_router(engine))
    return app
