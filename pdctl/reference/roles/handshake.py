"""The PD handshake: what a prefill server and a decode server tell each other, and what they refuse.

Why at registration: SGLang 0.5.23 refuses some pairings while the decode server fetches the prefill's info
(page size, KV dtype, MXFP8 with unequal attention TP) and others only when the first transfer is built (PP > 1
or a non-NHD layout on the head-slice path), where a bad pairing shows up late, as a hung or garbled request.
The reference engine checks all of them when a decode rank registers, so the request fails at once with
SGLang's own words (the same conditions check-compat reports before launch, from the same module:
pdctl/sglang/messages.py). Checks are pure functions of two JSON-able `ServerInfo` dicts, so both sides can
run them.
"""

from __future__ import annotations

from typing import Any

from pdctl.sglang import messages

# ServerInfo keys (both sides send them): role, tp_size, pp_size, page_size, kv_cache_dtype, kv_layout,
# hybrid_swa (an SWA pool exists), num_kv_heads, head_dim, num_layers, swa_layers, backend, skip_checks.
SHAPE_KEYS = ("num_kv_heads", "head_dim", "num_layers", "swa_layers")


def sglang_problem(prefill: dict[str, Any], decode: dict[str, Any]) -> str | None:
    """The first incompatibility SGLang 0.5.23 rejects, in SGLang's wording, or None."""
    if prefill["page_size"] != decode["page_size"]:
        return messages.page_size_mismatch(prefill["page_size"], decode["page_size"])
    if prefill["kv_cache_dtype"] != decode["kv_cache_dtype"]:
        return messages.kv_dtype_mismatch(prefill["kv_cache_dtype"], decode["kv_cache_dtype"])
    unequal = prefill["tp_size"] != decode["tp_size"]
    if unequal and decode["kv_cache_dtype"] == "mxfp8":
        states = ["block_scale"] + (["block_scale_swa"] if decode.get("hybrid_swa") else [])
        return messages.mxfp8_hetero_tp(prefill["tp_size"], decode["tp_size"], states)
    if not (decode["pp_size"] == prefill["pp_size"] or decode["pp_size"] == 1):
        return messages.pp_mismatch(decode["pp_size"], prefill["pp_size"])
    head_sliced_swa = unequal and prefill.get("hybrid_swa") and decode.get("hybrid_swa")
    if head_sliced_swa and prefill["pp_size"] > 1:
        return messages.SWA_HETERO_TP_PP
    if head_sliced_swa:
        for side in (prefill, decode):
            if side["kv_layout"] != "nhd":
                return messages.head_slice_layout(side["kv_layout"])
    return None


def pdctl_problem(prefill: dict[str, Any], decode: dict[str, Any]) -> str | None:
    """Pairings the transfer cannot carry at all (different model or backend): checked even when unsafe."""
    if prefill["backend"] != decode["backend"]:
        return messages.transfer_backend_mismatch(prefill["backend"], decode["backend"])
    diffs = [
        f"{k} {prefill.get(k)} != {decode.get(k)}" for k in SHAPE_KEYS if prefill.get(k) != decode.get(k)
    ]
    if diffs:
        return "KV shape mismatch between prefill and decode (different models?): " + ", ".join(diffs)
    if prefill.get("hybrid_swa") != decode.get("hybrid_swa"):
        return (
            "Hybrid SWA memory mismatch: prefill hybrid_swa_memory="
            f"{prefill.get('hybrid_swa')}, decode hybrid_swa_memory={decode.get('hybrid_swa')}"
        )
    p, d = prefill["tp_size"], decode["tp_size"]
    if p % d and d % p:
        return f"Attention TP sizes {p} (prefill) and {d} (decode) must divide one another"
    return None


def handshake_problem(prefill: dict[str, Any], decode: dict[str, Any]) -> str | None:
    """What the handshake rejects: pdctl's hard limits always, SGLang's rules unless a side skips them."""
    hard = pdctl_problem(prefill, decode)
    if hard:
        return hard
    if prefill.get("skip_checks") or decode.get("skip_checks"):
        return None
    return sglang_problem(prefill, decode)
