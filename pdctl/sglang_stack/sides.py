"""One rehearsal's two sides from a topology: each PD role as the SideSpec its driver builds SGLang's pools,
KVArgs and managers from (bench-transfer --stack sglang on this machine, preflight's transfer test across
nodes), and the memory they run in (DRAM, or VRAM where the nodes are GPUs and SGLang's interpreter sees CUDA).
"""

from __future__ import annotations

from typing import Any

from pdctl.errors import UserError
from pdctl.models import resolve_model_spec
from pdctl.sglang_stack.spec import SideSpec, torch_dtype_name

DEFAULT_TIMEOUT_S = 60.0


def side_specs(topo: Any, *, backend: str | None = None, tokens: int, device: str = "cpu",
               prefill_host: str = "127.0.0.1", decode_host: str = "127.0.0.1", seed: int = 0,
               timeout: float = DEFAULT_TIMEOUT_S, bypass_guards: bool = True) -> tuple[SideSpec, SideSpec]:
    """Each role of TOPO as one side of a rehearsal: its attention TP, page size, KV dtype, layout and hybrid
    SWA memory (the roles may disagree: a rehearsal shows what SGLang does then), and a hybrid linear-attention
    model's mamba state (its linear layers and state shape). UserError (exit 2) for what a rehearsal cannot
    run: colocated topologies, MLA models, PP > 1, linear-attention heads a role's TP does not divide, contexts
    shorter than --tokens."""
    pre, dec = topo.require_pd("bench-transfer --stack sglang")
    spec = resolve_model_spec(topo.model, engine_kind=topo.engine.kind)
    if spec.mla:
        raise UserError(f"{topo.name}: the SGLang-stack rehearsal covers MHA/GQA KV; {spec.name} uses MLA")
    linear = _linear(spec)
    if linear and spec.hybrid_swa:
        raise UserError(f"{topo.name}: {spec.name} has sliding-window and linear-attention layers; the SGLang-stack "
                        "rehearsal covers one of the two state kinds per model")
    if tokens < 1:
        raise UserError(f"--tokens must be positive, got {tokens}")
    limits = [r.context_length for r in (pre, dec) if r.context_length]
    if limits and tokens > min(limits):
        raise UserError(f"--tokens {tokens} exceeds the topology's context_length {min(limits)}")
    sides = []
    for role, host in ((pre, prefill_host), (dec, decode_host)):
        if role.pp != 1:
            raise UserError(f"{topo.name}: {role.name}.pp {role.pp}: the SGLang-stack rehearsal covers pp 1")
        if role.kv_layout == "vectorized_5d":
            raise UserError(f"{topo.name}: kv_layout vectorized_5d exists on ROCm only; a rehearsal cannot build it")
        if linear and (linear["num_key_heads"] % role.attn_tp or linear["num_value_heads"] % role.attn_tp):
            raise UserError(f"{topo.name}: {role.name}: attention TP {role.attn_tp} does not divide {spec.name}'s "
                            f"{linear['num_key_heads']} key / {linear['num_value_heads']} value linear-attention "
                            "heads; the SGLang-stack rehearsal covers whole heads per rank")
        hybrid = spec.hybrid_swa and bool(role.hybrid_swa_memory)
        dtype = str(role.kv_cache_dtype or "auto")
        try:
            pool_dtype = torch_dtype_name(dtype, topo.engine.kind)
        except ValueError as exc:
            raise UserError(f"{topo.name}: {role.name}: {exc}") from None
        sides.append(SideSpec(
            role=role.name, backend=backend or topo.transfer.backend, tp=role.attn_tp, page_size=role.page_size,
            tokens=tokens, full_layers=spec.full_layers if hybrid else spec.kv_layers,
            swa_layers=spec.swa_layers if hybrid else [], window=spec.sliding_window if hybrid else None,
            kv_heads=spec.num_kv_heads, head_dim=spec.head_dim, dtype=pool_dtype, kv_cache_dtype=dtype,
            kv_layout=role.kv_layout, seed=seed, device=device, host=host, bootstrap_host=prefill_host,
            bypass_guards=bypass_guards, timeout=timeout, linear_layers=spec.linear_layers if linear else [],
            linear=linear))
    return sides[0], sides[1]


def _linear(spec: Any) -> dict[str, int] | None:
    """The mamba state's shape of a hybrid linear-attention model, as a SideSpec carries it (None: no state)."""
    lin = spec.linear
    if lin is None or not spec.hybrid_linear:
        return None
    return {"num_key_heads": lin.num_key_heads, "num_value_heads": lin.num_value_heads,
            "key_head_dim": lin.key_head_dim, "value_head_dim": lin.value_head_dim, "conv_kernel": lin.conv_kernel,
            "ssm_bytes": lin.ssm_bytes}


def device_for(topo: Any, rehearsal: Any) -> str:
    """VRAM (torch.cuda) when the topology's nodes are GPUs and SGLang's interpreter sees CUDA, else DRAM."""
    gpus = all(topo.node(n).gpu != "cpu" for role in topo.roles() for n in role.nodes)
    cuda = all(bool(r.get("cuda")) for r in rehearsal.ready.values())
    return "cuda" if gpus and cuda else "cpu"
