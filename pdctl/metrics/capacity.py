"""KV capacity after launch: each server's real `max_total_num_tokens` against check-compat's estimate.

SGLang reports the tokens its KV pool holds in /server_info (the scheduler's init info merged into the server
args; /get_server_info on older releases); pdctl's reference engine serves the same key the same way. The
estimate is pdctl.compat.capacity's, for the topology the run was launched from (its copy in the run
directory; pdctl.launch.status computes it). They agree when the real pool is within TOLERANCE of the estimate (the reference engine: equal,
its pool is --max-total-tokens); a larger gap means something else took GPU memory or the estimate's inputs
(GPU memory, mem_fraction_static) are not what the servers run with, and the status says so.
"""

from __future__ import annotations

from typing import Any

import requests

TOLERANCE = 0.25
TIMEOUT_S = 5.0


def server_tokens(url: str, timeout: float = TIMEOUT_S) -> tuple[int | None, str | None]:
    """(max_total_num_tokens from URL's /server_info, None) or (None, why not)."""
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
        value = info.get("max_total_num_tokens") if isinstance(info, dict) else None
        if value is None and isinstance(info, dict):
            states = info.get("internal_states") or [{}]
            value = states[0].get("max_total_num_tokens") if isinstance(states[0], dict) else None
        return (int(value), None) if isinstance(value, (int, float)) else (None, "no max_total_num_tokens")
    return None, "HTTP 404"


def compare(actual: int | None, est: Any, *, exact: bool, why: str | None = None) -> dict[str, Any]:
    """The status entry: real tokens, estimate, ratio, and verdict agrees | differs | unknown."""
    expected = None if est is None else est.tokens
    out: dict[str, Any] = {"max_total_num_tokens": actual, "estimate": expected, "ratio": None, "verdict": "unknown",
                           "detail": why}
    if actual is None or not expected:
        out["detail"] = why or (est.why if est is not None and est.why else "no estimate")
        return out
    ratio = actual / expected
    out["ratio"] = round(ratio, 3)
    agrees = actual == expected if exact else abs(ratio - 1) <= TOLERANCE
    out["verdict"] = "agrees" if agrees else "differs"
    out["detail"] = (f"{actual:,} tokens, estimate {expected:,}" + ("" if agrees else (
        " (the reference engine's pool is --max-total-tokens: the run's topology and the server disagree)" if exact
        else f" (x{ratio:.2f}: more or less GPU memory than expected is in use, or mem_fraction_static / the GPU "
             "differ from the topology)")))
    return out


def capacities(records: list[dict[str, Any]], estimates: dict[str, Any], *, exact: bool,
               why: str | None = None) -> dict[str, dict]:
    """Process name -> its KV-capacity entry, for every HTTP-serving worker in RECORDS, against ESTIMATES (role
    -> check-compat's KvEstimate; pdctl.launch.status computes them from the run's topology). EXACT: the
    reference engine's pool is its --max-total-tokens; WHY: why there are no estimates."""
    out = {}
    for record in records:
        if not record.get("url"):
            continue
        actual, failed = server_tokens(record["url"])
        out[record["name"]] = compare(actual, estimates.get(record["role"]), exact=exact, why=failed or why)
    return out
