"""Command-line flags of the reference server (SGLang's names, so launch renders both engines alike)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from pdctl.reference.config import KV_LAYOUTS as LAYOUTS
from pdctl.transfer.registry import DEFAULT, NAMES

NUMERICS = ("exact", "gpu-like")  # pdctl.reference.numerics implements them (it imports torch; this must not)
DEFAULT_CHUNKED_PREFILL_SIZE = 4096

KV_DTYPES = ("auto", "float32", "bfloat16", "float16", "fp8_e4m3", "fp8_e5m2", "mxfp8")


@dataclass
class ServerArgs:
    """Parsed flags; `ignored` lists SGLang flags accepted for compatibility that have no effect here."""

    model_path: str
    role: str = "colocated"
    tp: int = 1
    host: str = "127.0.0.1"
    port: int = 30000
    page_size: int = 16
    kv_cache_dtype: str = "auto"
    kv_layout: str = "nhd"
    disable_hybrid_swa_memory: bool = False
    disaggregation_transfer_backend: str = DEFAULT
    disaggregation_bootstrap_port: int = 8998
    disaggregation_decode_enable_radix_cache: bool = False
    disable_radix_cache: bool = False
    max_total_tokens: int = 8192
    swa_max_total_tokens: int | None = None
    context_length: int | None = None
    random_seed: int = 0
    transfer_timeout: float = 30.0
    unsafe_skip_handshake_checks: bool = False
    chunked_prefill_size: int | None = None
    schedule_conservativeness: float = 1.0
    numerics: str = "exact"
    num_threads: int = 1
    served_model_name: str | None = None
    log_level: str = "info"
    port_file: str | None = None
    ignored: list[str] = field(default_factory=list)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser (also used by `pdctl reference serve` for --help)."""
    p = argparse.ArgumentParser(prog="python -m pdctl.reference", description="pdctl CPU reference engine server")
    a = p.add_argument
    a("--model-path", required=True, help="checkpoint directory (config.json + model.safetensors)")
    a("--role", "--disaggregation-mode", dest="role", default="colocated", choices=["colocated", "prefill", "decode", "null"])
    a("--tp", "--tp-size", dest="tp", type=int, default=1, help="tensor-parallel ranks (in one process)")
    a("--host", default="127.0.0.1")
    a("--port", type=int, default=30000)
    a("--page-size", type=int, default=16)
    a("--kv-cache-dtype", default="auto", choices=KV_DTYPES)
    a("--kv-layout", default="nhd", choices=list(LAYOUTS))
    a("--disable-hybrid-swa-memory", action="store_true")
    a("--disaggregation-transfer-backend", default=DEFAULT, choices=list(NAMES))
    a("--disaggregation-bootstrap-port", type=int, default=8998)
    a("--disaggregation-decode-enable-radix-cache", action="store_true")
    a("--disable-radix-cache", action="store_true")
    a("--max-total-tokens", type=int, default=8192, help="KV capacity (tokens) of the full pool")
    a("--swa-max-total-tokens", type=int, default=None, help="KV capacity of the SWA pool (default: same)")
    a("--context-length", type=int, default=None)
    a("--random-seed", type=int, default=0)
    a("--transfer-timeout", type=float, default=30.0, help="seconds before a PD transfer is given up")
    a("--unsafe-skip-handshake-checks", action="store_true")
    a("--chunked-prefill-size", type=int, default=None,
      help=f"max prefill tokens per engine step; longer prompts run in page-aligned chunks interleaved with decode "
           f"steps (SGLang's meaning; default {DEFAULT_CHUNKED_PREFILL_SIZE}, SGLang's fallback; -1 disables chunking)")
    a("--schedule-conservativeness", type=float, default=1.0,
      help="scales the share of max_new_tokens reserved at admission (SGLang's flag); running out of KV pages "
           "during decode retracts requests and re-queues them")
    a("--numerics", default="exact", choices=list(NUMERICS),
      help="exact: float32, batch/TP/chunk-invariant; gpu-like: bf16 storage and shape-dependent reduction "
           "order, seeded by --random-seed (docs/reference-engine.md)")
    a("--num-threads", type=int, default=1,
      help="torch CPU threads (fixed, not from the environment: results must not depend on the host)")
    a("--served-model-name", default=None)
    a("--log-level", default="info")
    a("--port-file", default=None,
      help="once serving, write the bound ports as JSON {port, bootstrap_port, pid} here (for --port 0)")
    return p


def parse_args(argv: list[str] | None = None) -> ServerArgs:
    """Parse ARGV; unknown flags (other SGLang options) are kept in `ignored` and reported, not fatal."""
    ns, unknown = build_parser().parse_known_args(argv)
    d = vars(ns)
    if d["role"] == "null":
        d["role"] = "colocated"
    args = ServerArgs(**d)
    args.ignored = unknown
    problems = []
    if args.page_size < 1:
        problems.append("--page-size must be >= 1")
    if args.max_total_tokens < args.page_size:
        problems.append("--max-total-tokens must be at least one page")
    if args.num_threads < 1:
        problems.append("--num-threads must be >= 1")
    if args.tp < 1:
        problems.append("--tp must be >= 1")
    if args.context_length is not None and args.context_length < 2:
        problems.append("--context-length must be >= 2")
    if args.chunked_prefill_size is None:
        args.chunked_prefill_size = DEFAULT_CHUNKED_PREFILL_SIZE
    if args.chunked_prefill_size == 0 or args.chunked_prefill_size < -1:
        problems.append("--chunked-prefill-size must be positive, or -1 to disable chunked prefill")
    elif 0 < args.chunked_prefill_size < args.page_size:
        problems.append("--chunked-prefill-size must be at least one page (--page-size)")
    if not args.schedule_conservativeness > 0:
        problems.append("--schedule-conservativeness must be > 0")
    if problems:
        build_parser().error("; ".join(problems))
    return args
