"""The reference engine's HTTP layer: SGLang's endpoints and response shapes on FastAPI.

`app.create_app(engine)` assembles the routes: `admin` (health, info, models, flush), `generate` (/generate and
the OpenAI endpoints, streamed or not). `bridge` carries requests to the engine thread and their tokens back;
`sglang_api` / `openai_api` are the pure request/response shapes. One module per route group, so further
groups (e.g. Prometheus /metrics) are one more module and one more `include_router`.
"""
