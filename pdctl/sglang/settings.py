"""What one SGLang server process will run with: its parsed flags plus the environment variables SGLang reads.

The rules of check-compat read these, not the topology's intent, because the command line can say something
else (an `args:` override, an env var in engine.env). The derivations here are SGLang's (attention TP from
--attn-dp-size or the older --dp-size + --enable-dp-attention; the KV layout from SGLANG_USE_HND_KVCACHE; the
staging buffer from SGLANG_DISAGG_STAGING_BUFFER; mooncake_tcp; UCX's transports for NIXL).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pdctl.sglang.argv import ParsedArgs
from pdctl.transfer.registry import BACKENDS, from_sglang

_TRUE = ("true", "1", "yes", "y")  # SGLang's EnvBool
_FALSE = ("false", "0", "no", "n")
# UCX transports that are RDMA (InfiniBand / RoCE verbs); the others are TCP, shared memory, CUDA copies.
UCX_RDMA_TLS = ("rc", "rc_v", "rc_x", "rc_mlx5", "ud", "ud_v", "ud_x", "ud_mlx5", "dc", "dc_x", "dc_mlx5", "ib")
ENV_HND = "SGLANG_USE_HND_KVCACHE"
ENV_AITER_LAYOUT = "SGLANG_AITER_KV_CACHE_LAYOUT"
ENV_STAGING = "SGLANG_DISAGG_STAGING_BUFFER"


def env_bool(env: dict[str, str], name: str) -> bool | None:
    """SGLang's EnvBool reading of NAME (None when unset or not a boolean SGLang accepts)."""
    value = env.get(name)
    if value is None:
        return None
    low = str(value).strip().lower()
    return True if low in _TRUE else (False if low in _FALSE else None)


def ucx_protocol(env: dict[str, str]) -> str:
    """'tcp' when UCX_TLS restricts UCX to non-RDMA transports, else 'rdma' (UCX's choice when unset)."""
    tls = env.get("UCX_TLS")
    if not tls:
        return "rdma"
    names = [t.strip().lstrip("^").split(":")[0] for t in tls.split(",") if t.strip()]
    if tls.strip().startswith("^"):  # an exclusion list: RDMA stays unless every RDMA transport is excluded
        return "tcp" if all(t in names for t in ("rc", "ud", "dc")) else "rdma"
    return "rdma" if any(n in UCX_RDMA_TLS or n == "all" for n in names) else "tcp"


@dataclass(frozen=True)
class ServerSettings:
    """One process's effective settings. `values` are SGLang's argparse dests (defaults filled in)."""

    parsed: ParsedArgs
    env: dict[str, str] = field(default_factory=dict)

    @property
    def values(self) -> dict[str, Any]:
        return self.parsed.values

    def get(self, dest: str, default: Any = None) -> Any:
        value = self.parsed.values.get(dest)
        return default if value is None else value

    @property
    def tp(self) -> int:
        return int(self.get("tp_size", 1))

    @property
    def pp(self) -> int:
        return int(self.get("pp_size", 1))

    @property
    def dp(self) -> int:
        return int(self.get("dp_size", 1))

    @property
    def attn_dp(self) -> int:
        """Attention DP size: --attn-dp-size (SGLang >= 0.5.22), else dp_size with --enable-dp-attention."""
        explicit = self.values.get("attn_dp_size")
        if explicit is not None and int(explicit) > 1:
            return int(explicit)
        return self.dp if self.get("enable_dp_attention", False) else 1

    @property
    def enable_dp_attention(self) -> bool:
        return self.attn_dp > 1 or bool(self.get("enable_dp_attention", False))

    @property
    def attn_tp(self) -> int:
        """tp / attention DP: what decides KV head ownership."""
        return max(1, self.tp // max(1, self.attn_dp))

    @property
    def page_size(self) -> int | None:
        value = self.values.get("page_size")
        return None if value is None else int(value)

    @property
    def kv_cache_dtype(self) -> str:
        return str(self.get("kv_cache_dtype", "auto"))

    @property
    def hybrid_swa_memory(self) -> bool:
        return not self.get("disable_hybrid_swa_memory", False)

    @property
    def unified_memory(self) -> bool:
        return bool(self.get("enable_unified_memory", False))

    @property
    def attention_backends(self) -> list[str]:
        """--attention-backend and the per-phase overrides that are set."""
        names = [self.values.get(k) for k in ("attention_backend", "prefill_attention_backend",
                                              "decode_attention_backend")]
        return [str(n) for n in names if n]

    @property
    def chunked_prefill_size(self) -> int | None:
        value = self.values.get("chunked_prefill_size")
        return None if value is None else int(value)

    @property
    def disaggregation_mode(self) -> str:
        return str(self.get("disaggregation_mode", "null"))

    @property
    def transfer_backend(self) -> str:
        """SGLang's backend name as given (nixl, mooncake, mooncake_tcp, ...)."""
        return str(self.get("disaggregation_transfer_backend", "mooncake"))

    @property
    def backend(self) -> str:
        """The transfer library (pdctl.transfer.registry): mooncake_tcp is Mooncake."""
        return from_sglang(self.transfer_backend)[0]

    @property
    def protocol(self) -> str:
        """tcp | rdma: what the backend's name forces (mooncake_tcp), UCX_TLS for a UCX backend, else rdma."""
        name, forced = from_sglang(self.transfer_backend)
        if forced:
            return forced
        entry = BACKENDS.get(name)
        return ucx_protocol(self.env) if entry is not None and entry.ucx else "rdma"

    @property
    def radix_cache(self) -> bool:
        return bool(self.get("disaggregation_decode_enable_radix_cache", False))

    @property
    def kv_layout(self) -> str:
        """The KV cache layout SGLang picks on NVIDIA: HND with SGLANG_USE_HND_KVCACHE, else NHD.
        (SGLANG_AITER_KV_CACHE_LAYOUT=vectorized_5d is read only by the ROCm aiter backend.)"""
        return "hnd" if env_bool(self.env, ENV_HND) else "nhd"

    @property
    def staging(self) -> bool:
        return bool(env_bool(self.env, ENV_STAGING))



# PD timeouts SGLang reads from the environment (environ.py, 0.5.23; the same names and defaults from 0.5.0,
# read off the wheels; how an unparsable value is treated changed in 0.5.8: pdctl.sglang.facts.ENV_WARNS_SINCE):
# name -> (EnvInt/EnvFloat kind, default, the floor SGLang applies, the side that reads it). SGLang parses
# with int()/float(); a value it cannot parse is replaced by the default, with a Python warning only.
DISAGG_TIMEOUTS: dict[str, tuple[str, float, float | None, str]] = {
    "SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT": ("integer", 300, None, "prefill"),
    "SGLANG_DISAGGREGATION_WAITING_TIMEOUT": ("integer", 300, None, "decode"),
    "SGLANG_DISAGGREGATION_HEARTBEAT_INTERVAL": ("float", 5.0, 2.0, "decode"),
    "SGLANG_DISAGGREGATION_HEARTBEAT_MAX_FAILURE": ("integer", 2, 1, "decode"),
}


def env_number(env: dict[str, str], name: str) -> tuple[float, str | None]:
    """(the value SGLang uses for NAME, the raw text it could not parse or None), floor applied."""
    kind, default, floor, _side = DISAGG_TIMEOUTS[name]
    raw = env.get(name)
    if raw is None:
        return default, None
    try:
        value: float = int(raw) if kind == "integer" else float(raw)
    except ValueError:
        return default, raw
    return (max(value, floor) if floor is not None else value), None
