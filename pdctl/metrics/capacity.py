"""KV capacity after launch: each server's real KV pool against check-compat's estimate.

SGLang reports the tokens its KV pool holds in /server_info (the scheduler's init info merged into the server
args; /get_server_info on older releases): `max_total_num_tokens`, and in `internal_states[0].memory_usage`
the SWA pool's tokens of a hybrid sliding-window model (`token_capacity_swa`) and the pool's size
(`kvcache`, GiB rounded to 3 decimals); pdctl's reference engine serves the same keys the same way. The
estimate is pdctl.compat.capacity's, for the topology the run was launched from (its copy in the run
directory; pdctl.launch.status computes it). They agree when the real pool is within TOLERANCE of the estimate;
an exact estimate (the reference engine's pool, a CPU node's --max-total-tokens) must be met exactly, the SWA
pool too. A larger gap means something else took GPU memory or the estimate's inputs (GPU memory,
mem_fraction_static, the flags) are not what the servers run with, and the status says so.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import requests

TOLERANCE = 0.25
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ServerPool:
    """What a server reports of its KV pool."""

    tokens: int
    swa_tokens: int | None = None
    kv_gib: float | None = None


def _number(value: Any) -> float | None:
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def pool_of(info: Any) -> ServerPool | None:
    """The KV pool a /server_info document reports, or None without max_total_num_tokens."""
    if not isinstance(info, dict):
        return None
    states = info.get("internal_states")
    state = states[0] if isinstance(states, list) and states and isinstance(states[0], dict) else {}
    tokens = _number(info.get("max_total_num_tokens"))
    if tokens is None:
        tokens = _number(state.get("max_total_num_tokens"))
    if tokens is None:
        return None
    usage = state.get("memory_usage") if isinstance(state.get("memory_usage"), dict) else {}
    swa = _number(usage.get("token_capacity_swa"))
    return ServerPool(int(tokens), None if swa is None else int(swa), _number(usage.get("kvcache")))


def server_pool(url: str, timeout: float = TIMEOUT_S) -> tuple[ServerPool | None, str | None]:
    """(the KV pool URL's /server_info reports, None) or (None, why not)."""
    for path in ("/server_info", "/get_server_info"):
        try:
            response = requests.get(url.rstrip("/") + path, timeout=timeout)
        except requests.RequestException as exc:
            return None, f"unreachable ({type(exc).__name__})"
        if response.status_code == 404:
            continue
        if response.status_code != 200:
            return None, f"HTTP {response.status_code}"
        try:
            info = response.json()
        except ValueError:
            return None, "not JSON"
        pool = pool_of(info)
        return (pool, None) if pool is not None else (None, "no max_total_num_tokens")
    return None, "HTTP 404"


def _off(actual: int, expected: int, exact: bool) -> bool:
    return actual != expected if exact else abs(actual / expected - 1) > TOLERANCE


def compare(pool: ServerPool | None, est: Any, why: str | None = None) -> dict[str, Any]:
    """The status entry: the server's pool (tokens, SWA tokens, GiB), the estimate (tokens, SWA tokens, bytes,
    its basis), the ratio, and the verdict agrees | differs | unknown."""
    expected = None if est is None else est.tokens
    swa_expected = None if est is None else est.swa_tokens
    out: dict[str, Any] = {
        "max_total_num_tokens": None if pool is None else pool.tokens, "estimate": expected,
        "swa_max_total_num_tokens": None if pool is None else pool.swa_tokens, "swa_estimate": swa_expected,
        "kv_gib": None if pool is None else pool.kv_gib,
        "estimate_bytes": None if est is None else est.kv_bytes,
        "basis": None if est is None or not est.tokens else est.why,
        "ratio": None, "verdict": "unknown", "detail": why}
    if pool is None or not expected:
        out["detail"] = why or (est.why if est is not None and est.why else "no estimate")
        return out
    exact = bool(est.exact)
    ratio = pool.tokens / expected
    out["ratio"] = round(ratio, 3)
    swa_off = pool.swa_tokens is not None and bool(swa_expected) and _off(pool.swa_tokens, swa_expected, exact)
    swa_missing = bool(swa_expected) and pool.swa_tokens is None and exact
    agrees = not _off(pool.tokens, expected, exact) and not swa_off and not swa_missing
    out["verdict"] = "agrees" if agrees else "differs"
    swa = (f", SWA {pool.swa_tokens:,}" if pool.swa_tokens is not None else "")
    swa_est = f", SWA {swa_expected:,}" if swa_expected else ""
    basis = f" ({est.why})" if exact and est.why else ""
    out["detail"] = f"{pool.tokens:,} tokens{swa}, estimate {expected:,}{swa_est}{basis}" + ("" if agrees else (
        " — the server's pool is not the one the run's topology fixes: the topology and the servers disagree"
        if exact else f" (x{ratio:.2f}: more or less GPU memory than expected is in use, or mem_fraction_static / "
                      "the GPU differ from the topology)"))
    return out


def capacities(records: list[dict[str, Any]], estimates: dict[str, Any], why: str | None = None) -> dict[str, dict]:
    """Process name -> its KV-capacity entry, for every HTTP-serving worker in RECORDS, against ESTIMATES (role
    -> check-compat's KvEstimate; pdctl.launch.status computes them from the run's topology). WHY: why there are
    no estimates."""
    out = {}
    for record in records:
        if not record.get("url"):
            continue
        pool, failed = server_pool(record["url"])
        out[record["name"]] = compare(pool, estimates.get(record["role"]), why=failed or why)
    return out
