"""GET /metrics: the server's Prometheus metrics (SGLang's names; pdctl.metrics.engine), for Prometheus,
Grafana and `pdctl status --watch`. SGLang serves it only with --enable-metrics; the reference engine always
does (it costs nothing until scraped)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import Response


def make_router(engine: Any) -> APIRouter:
    """The /metrics route of ENGINE."""
    from prometheus_client import CONTENT_TYPE_LATEST

    router = APIRouter()

    @router.get("/metrics")
    async def metrics() -> Response:
        return Response(engine.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    return router
