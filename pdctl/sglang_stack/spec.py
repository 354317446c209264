"""One side of a rehearsal on SGLang's stack (prefill ranks or decode ranks), as the two interpreters share it.

pdctl's interpreter resolves a topology into two `SideSpec`s and sends them as JSON to a driver running in
SGLang's interpreter; nothing here imports more than the standard library, so both ends use this module.
Each side is described on its own (its TP, page size, KV dtype, layout): a rehearsal of a mismatched pair is
two sides that disagree, as two real servers would.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

# torch dtype names a pool may use, by the bytes of one element (the KV cache dtype decides).
POOL_DTYPES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn": 1, "float8_e5m2": 1}


@dataclass(frozen=True)
class SideSpec:
    """One role's ranks, pools and transfer settings for one rehearsal case."""

    role: str  # "prefill" | "decode"
    backend: str  # "nixl" | "mooncake"
    tp: int  # attention TP of this role
    page_size: int
    tokens: int  # prompt tokens of the request moved
    full_layers: list[int]  # model layer ids of full-attention layers
    swa_layers: list[int]  # model layer ids of sliding-window layers (empty: no hybrid SWA memory)
    window: int | None  # sliding window in tokens (SWA layers only)
    kv_heads: int  # the model's KV heads (all ranks together)
    head_dim: int
    dtype: str  # torch dtype of the pools (a key of POOL_DTYPES)
    kv_cache_dtype: str = "auto"  # the --kv-cache-dtype string both sides compare at the handshake
    kv_layout: str = "nhd"
    seed: int = 0
    device: str = "cpu"  # "cpu" (DRAM) | "cuda" (VRAM)
    host: str = "127.0.0.1"  # the address this side's endpoints advertise (SGLANG_HOST_IP)
    bootstrap_host: str = "127.0.0.1"  # the prefill's bootstrap server (prefill: where to bind it)
    bootstrap_port: int = 0  # prefill: 0 = choose a free port; decode: the prefill's port
    bypass_guards: bool = True  # skip SGLang guards that only a CPU rehearsal trips (reported when used)
    timeout: float = 60.0  # SGLang's bootstrap/waiting timeouts and the driver's own waits
    # hybrid linear attention (Qwen3-Next): model layer ids of the linear layers, whose per-request mamba state
    # moves as SGLang's StateType.MAMBA, and the state's shape (num_key_heads, num_value_heads, key_head_dim,
    # value_head_dim, conv_kernel, ssm_bytes); empty / None for a model without linear attention
    linear_layers: list[int] = field(default_factory=list)
    linear: dict[str, int] | None = None
    # a fault a test injects to prove the byte check says no (never set by pdctl's commands): "state-bytes" (the
    # prefill's mamba state differs from the seeded one by a byte), "state-slot" (decode asks SGLang for another
    # mamba slot than the one its scheduler would read)
    fault: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def elem_bytes(self) -> int:
        return POOL_DTYPES[self.dtype]

    @property
    def head_bytes(self) -> int:
        return self.head_dim * self.elem_bytes

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> SideSpec:
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in doc.items() if k in names})


def torch_dtype_name(kv_cache_dtype: str, engine_kind: str) -> str:
    """The pool dtype a KV cache dtype means: SGLang's `auto` is the checkpoint's bf16 (the reference engine
    caches float32), fp8 variants are one byte."""
    if kv_cache_dtype in ("auto", "bf16", "bfloat16"):
        return "float32" if engine_kind == "reference" else "bfloat16"
    if kv_cache_dtype in ("fp8_e5m2",):
        return "float8_e5m2"
    if kv_cache_dtype.startswith("fp8"):
        return "float8_e4m3fn"
    if kv_cache_dtype in ("float16", "fp16", "half"):
        return "float16"
    if kv_cache_dtype in ("float32", "fp32"):
        return "float32"
    raise ValueError(f"kv_cache_dtype {kv_cache_dtype!r}: no pool dtype for a rehearsal on SGLang's stack")
