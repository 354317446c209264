"""SGLang's service endpoints: health, server and model info, the model list, and the prefix-cache flush."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response

from pdctl import __version__
from pdctl.reference.http.bridge import EngineCall
from pdctl.reference.request import GenRequest
from pdctl.reference.roles.corrupt import parse_spec
from pdctl.reference.sampling import SamplingParams


def make_router(engine: Any) -> APIRouter:
    """The admin routes of ENGINE."""
    router = APIRouter()
    pd_half = engine.args.role in ("prefill", "decode")

    @router.get("/health")
    async def health() -> Response:
        return Response(status_code=200)

    @router.get("/health_generate")
    async def health_generate() -> Response:
        if pd_half:  # a PD half cannot generate alone
            return Response(status_code=200)
        req = GenRequest(rid="health", input_ids=[256, 104], sampling=SamplingParams(max_new_tokens=1, temperature=0))
        (done,) = await EngineCall(engine, [req]).wait()
        return Response(status_code=200 if done.error is None else 503)

    @router.get("/v1/models")
    async def models() -> dict[str, Any]:
        return {"object": "list", "data": [{"id": engine.model_name, "object": "model", "created": 0,
                                            "owned_by": "pdctl", "root": engine.model_name,
                                            "max_model_len": engine.context_length}]}

    @router.api_route("/flush_cache", methods=["GET", "POST"])
    async def flush_cache() -> Response:
        pages = await asyncio.to_thread(engine.scheduler.flush_cache)
        return Response(f"Cache flushed ({pages} pages).\n", status_code=200)

    def server_info() -> dict[str, Any]:
        a = engine.args
        doc = {k: v for k, v in vars(a).items() if k != "ignored"}
        doc.update({
            "version": f"pdctl-reference-{__version__}", "engine": "pdctl-reference",
            "tp_size": a.tp, "dp_size": 1, "pp_size": 1, "disaggregation_mode": "null" if a.role == "colocated" else a.role,
            # SGLang's scheduler info: the full pool's tokens, page-aligned (what the KV pool really holds)
            "context_length": engine.context_length,
            "max_total_num_tokens": engine.kv.full_alloc.usable_pages * engine.kv.page_size,
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

    corruptor = getattr(engine.role, "corruptor", None)
    if corruptor is not None:  # TEST HOOK (pdctl.reference.roles.corrupt): only on a server armed with it
        @router.get("/test_hook/corrupt_kv")
        async def corrupt_state() -> dict[str, Any]:
            return corruptor.state()

        @router.post("/test_hook/corrupt_kv")
        async def corrupt_set(request: Request) -> Any:
            try:
                body = await request.json()
                corruptor.set(parse_spec(str(body.get("spec", ""))))
            except (ValueError, AttributeError) as exc:
                return JSONResponse({"error": {"message": str(exc)}}, status_code=400)
            return corruptor.state()

    for path in ("/server_info", "/get_server_info"):
        router.add_api_route(path, server_info, methods=["GET"])
    for path in ("/model_info", "/get_model_info"):
        router.add_api_route(path, model_info, methods=["GET"])
    return router
