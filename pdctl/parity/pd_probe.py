"""Ask a PD pair directly how many prompt tokens prefill served from its prefix cache.

Why: warm mode must show that prefill reused its prefix (cached_tokens > 0), but what the router returns is
decode's answer. SGLang's decode copies prefill's cached_tokens into its own (it travels with the KV
metadata); an engine whose decode does not (pdctl's reference engine at the time of writing) reports 0
through the router although prefill did reuse the prefix. When the router's answer says 0 and parity knows
the prefill and decode servers, it sends the same request the way the router does — one body with
bootstrap_host/port/room to both halves at once — and reads prefill's own meta_info.cached_tokens.
"""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import urlsplit

from pdctl.errors import CheckFailed
from pdctl.parity import client
from pdctl.parity.prompts import Prompt


def bootstrap_port(prefill_url: str) -> int | None:
    """The prefill server's disaggregation bootstrap port, from its /server_info (SGLang's key)."""
    info = client.get_json(prefill_url, "/server_info", "/get_server_info") or {}
    port = info.get("disaggregation_bootstrap_port")
    return int(port) if isinstance(port, int) and not isinstance(port, bool) else None


def prefill_cached_tokens(
    prefill_url: str, decode_url: str, prompt: Prompt, *, max_new_tokens: int, logprob_start_len: int
) -> int | None:
    """Send PROMPT to the PD pair as the router would; prefill's cached_tokens (None when not measurable)."""
    port = bootstrap_port(prefill_url)
    if port is None:
        return None
    body: dict[str, Any] = client.generate_body(prompt, max_new_tokens=max_new_tokens,
                                                logprob_start_len=logprob_start_len)
    body.update({"bootstrap_host": urlsplit(prefill_url).hostname, "bootstrap_port": port,
                 "bootstrap_room": random.getrandbits(63)})
    import requests

    def post(url: str) -> dict[str, Any]:
        response = requests.post(url.rstrip("/") + "/generate", json=body, timeout=client.GENERATE_TIMEOUT_S)
        if response.status_code != 200:
            raise CheckFailed(f"{url}: direct PD /generate answered HTTP {response.status_code}",
                              detail=response.text[-500:])
        doc = response.json()
        return (doc[0] if isinstance(doc, list) and doc else doc).get("meta_info") or {}

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = [pool.submit(post, prefill_url), pool.submit(post, decode_url)]
        try:
            prefill_meta, _decode_meta = (f.result() for f in futures)
        except (CheckFailed, ValueError, requests.RequestException):
            return None
    cached = prefill_meta.get("cached_tokens")
    return int(cached) if isinstance(cached, int) else None
