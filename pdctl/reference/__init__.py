"""The CPU reference engine: a small, real PD-capable inference server that speaks SGLang's protocols.

Modules: tokenizer (bytes + BOS/EOS), config (config.json <-> dataclass), checkpoint (deterministic weights),
model (per-rank weight shards and the layer math), numerics (exact | gpu-like arithmetic), kvcache (paged
pools per rank), pages (page accounting), prefix_cache, ranks (TP forward over a batch), sampling, scheduler
(engine thread) with chunks (chunked prefill), retraction (admission ratio, retract/re-queue) and handoff (PD
hand-off), roles (PD plug-in protocol and the KV transfer), http (FastAPI routes, streaming, API shapes),
engine (assembly from flags), server (the process: bind, serve, port file).

Importing this package is cheap: torch and fastapi are imported only by the modules that use them.
"""
