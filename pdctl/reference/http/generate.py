"""SGLang's generation endpoints: /generate, /v1/completions, /v1/chat/completions — whole answers, or streamed
(`stream: true`) as server-sent events, one per token, ending with `data: [DONE]`.

Streams follow SGLang: /generate events carry the cumulative `text`, `output_ids` and `meta_info` (`index` too
in a batch); the OpenAI endpoints send OpenAI's chunks. A request that fails before its first token is
answered with an HTTP error (status and JSON body, as without streaming); one that fails later ends its
stream with a `data: {"error": ...}` event. A client that goes away aborts its requests.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from pdctl.reference.http.bridge import EngineCall, TokenEvent
from pdctl.reference.http.openai_api import (
    OpenAIStream,
    chat_response,
    completion_response,
    parse_completion,
)
from pdctl.reference.http.sglang_api import ApiError, error_body, generate_response, parse_generate
from pdctl.reference.request import GenRequest
from pdctl.reference.roles.base import RequestInfo

Render = Callable[[TokenEvent], list[str]]


def error_response(message: str, status: int) -> JSONResponse:
    """SGLang/OpenAI-style error document with STATUS."""
    return JSONResponse(error_body(message, status), status_code=status)


async def read_json(request: Request) -> Any:
    """The request body as JSON; malformed JSON is a 400."""
    raw = await request.body()
    try:
        return json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"malformed JSON body: {exc}") from exc


def _failed(reqs: list[GenRequest]) -> JSONResponse | None:
    for r in reqs:
        if r.error is not None:
            return error_response(r.error, r.error_status)
    return None


async def sse(call: EngineCall, render: Render, final: Callable[[], list[str]] = list) -> Response:
    """Stream CALL's token events rendered by RENDER as server-sent events, then FINAL's chunks and [DONE]."""
    events = call.events()
    first = await anext(events)
    if first.done and call.reqs[first.index].error is not None:  # failed before its first token
        call.abort()
        req = call.reqs[first.index]
        return error_response(req.error or "request failed", req.error_status)

    async def body() -> AsyncIterator[str]:
        try:
            pending: TokenEvent | None = first
            while pending is not None:
                req = call.reqs[pending.index]
                if pending.done and req.error is not None:
                    yield f"data: {json.dumps({'error': error_body(req.error, req.error_status)['error']})}\n\n"
                    break
                for chunk in render(pending):
                    yield chunk
                pending = await anext(events, None)
            else:
                for chunk in final():
                    yield chunk
            yield "data: [DONE]\n\n"
        finally:  # the stream ended or the client went away: nothing keeps decoding for nobody
            call.abort()

    return StreamingResponse(body(), media_type="text/event-stream")


def abort_pd_room(engine: Any, body: Any, message: str) -> None:
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


def make_router(engine: Any) -> APIRouter:
    """The generation routes of ENGINE."""
    router = APIRouter()
    is_decode = engine.args.role == "decode"

    @router.post("/generate")
    async def generate(request: Request) -> Response:
        body = await read_json(request)
        try:
            reqs, batch = parse_generate(body, engine.context_length)
        except ApiError as exc:
            abort_pd_room(engine, body, exc.message)
            raise
        if not body.get("stream"):
            done = await EngineCall(engine, reqs).wait()
            bad = _failed(done)
            if bad is not None:
                return bad
            docs = [generate_response(r, input_logprobs=not is_decode) for r in done]
            return JSONResponse(docs if batch else docs[0])

        def render(ev: TokenEvent) -> list[str]:
            doc = generate_response(reqs[ev.index], input_logprobs=not is_decode, upto=None if ev.done else ev.tokens)
            if batch:
                doc["index"] = ev.index
            return [f"data: {json.dumps(doc)}\n\n"]

        return await sse(EngineCall(engine, reqs, stream=True), render)

    async def openai(request: Request, chat: bool) -> Response:
        body = await read_json(request)
        req = parse_completion(body, engine.context_length, chat)
        if not body.get("stream"):
            (done,) = await EngineCall(engine, [req]).wait()
            bad = _failed([done])
            if bad is not None:
                return bad
            return JSONResponse((chat_response if chat else completion_response)(done, engine.model_name))
        options = body.get("stream_options") if isinstance(body.get("stream_options"), dict) else {}
        stream = OpenAIStream(req, engine.model_name, chat=chat, include_usage=bool(options.get("include_usage")))
        return await sse(EngineCall(engine, [req], stream=True), lambda ev: stream.chunks(ev.tokens, ev.done),
                         stream.final)

    @router.post("/v1/completions")
    async def completions(request: Request) -> Response:
        return await openai(request, chat=False)

    @router.post("/v1/chat/completions")
    async def chat(request: Request) -> Response:
        return await openai(request, chat=True)

    return router
