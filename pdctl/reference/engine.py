"""Assembling an engine from ServerArgs: weights -> TP model -> KV cache -> role -> scheduler.

Kept apart from the HTTP layer so tests (and benchmarks) can drive a real engine in-process.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from pdctl.errors import UserError
from pdctl.metrics.engine import EngineMetrics
from pdctl.reference.args import ServerArgs
from pdctl.reference.checkpoint import load_weights
from pdctl.reference.config import ModelConfig
from pdctl.reference.kvcache import KVCache
from pdctl.reference.model import head_shard, validate_tp
from pdctl.reference.numerics import make_numerics
from pdctl.reference.ranks import TPModel
from pdctl.reference.roles import make_role
from pdctl.reference.roles.base import PDSettings, Role, RoleContext
from pdctl.reference.scheduler import Scheduler

log = logging.getLogger("pdctl.reference")


@dataclass
class Engine:
    """A ready engine: config, model, cache, role and the (not yet started) scheduler."""

    args: ServerArgs
    cfg: ModelConfig
    model: TPModel
    kv: KVCache
    role: Role
    scheduler: Scheduler
    context_length: int
    metrics: EngineMetrics  # /metrics (pdctl.reference.http.metrics)

    @property
    def model_name(self) -> str:
        """Model id for /v1/models and /model_info (SGLang: served name, else the path)."""
        return self.args.served_model_name or self.args.model_path


def build_engine(args: ServerArgs) -> Engine:
    """Load the checkpoint and build every part; invalid flags/config raise UserError."""
    import torch

    # A fixed thread count: oversubscribed OpenMP threads make small steps ~30x slower, and float results
    # of a kernel may depend on its thread count, so every server of a deployment computes alike.
    torch.set_num_threads(args.num_threads)
    cfg, tensors = load_weights(args.model_path)
    validate_tp(cfg, args.tp)
    context = args.context_length or cfg.max_position_embeddings
    if context > cfg.max_position_embeddings:
        raise UserError(
            f"--context-length {context} exceeds the model's max_position_embeddings {cfg.max_position_embeddings}"
        )
    shard = head_shard(cfg, args.tp, 0)
    kv = KVCache(
        tp=args.tp,
        layer_is_sliding=[cfg.is_sliding(i) for i in range(cfg.num_hidden_layers)],
        heads_on_rank=shard.kv_heads,
        head_dim=cfg.head_dim,
        page_size=args.page_size,
        max_total_tokens=args.max_total_tokens,
        swa_tokens=args.swa_max_total_tokens,
        hybrid_swa=not args.disable_hybrid_swa_memory,
        layout=args.kv_layout,
    )
    model = TPModel(cfg, tensors, args.tp, kv, make_numerics(args.numerics, args.random_seed))
    settings = PDSettings(
        host=args.host,
        transfer_backend=args.disaggregation_transfer_backend,
        bootstrap_port=args.disaggregation_bootstrap_port,
        transfer_timeout=args.transfer_timeout,
        unsafe_skip_handshake_checks=args.unsafe_skip_handshake_checks,
        kv_cache_dtype=args.kv_cache_dtype,
        kv_layout=args.kv_layout,
        page_size=args.page_size,
        hybrid_swa_memory=not args.disable_hybrid_swa_memory,
    )
    metrics = EngineMetrics(model_name=args.served_model_name or args.model_path, role=args.role,
                            page_size=args.page_size, context_len=context)
    ctx = RoleContext(cfg, args.tp, kv, settings, str(Path(args.model_path)), shard.kv_heads, metrics=metrics)
    role = make_role(args.role, ctx)
    radix = not args.disable_radix_cache
    if args.role == "decode":
        radix = args.disaggregation_decode_enable_radix_cache
    scheduler = Scheduler(
        model, kv, role, radix_cache=radix, random_seed=args.random_seed,
        chunked_prefill_size=args.chunked_prefill_size or -1,
        schedule_conservativeness=args.schedule_conservativeness, metrics=metrics,
    )
    metrics.load = scheduler.load_book.load
    ctx.live_rooms = scheduler.live_rooms  # the role's liveness answers say which rooms this server holds
    return Engine(args, cfg, model, kv, role, scheduler, context, metrics)
