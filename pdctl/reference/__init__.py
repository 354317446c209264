"""The CPU reference engine: a small, real PD-capable inference server that speaks SGLang's protocols.

Modules: tokenizer (bytes + BOS/EOS), config (config.json <-> dataclass), checkpoint (deterministic weights),
model (per-rank weight shards and the layer math), kvcache (paged pools per rank), ranks (TP forward over a
batch), prefix_cache, sampling, scheduler (engine thread), roles (PD plug-in protocol), api (HTTP request
parsing and response shapes), server (FastAPI app and command line).

Importing this package is cheap: torch and fastapi are imported only by the modules that use them.
"""
