"""The HTTP calls parity makes, shaped like SGLang's parity kit (`PDLogprobParityMixin`).

Why a module of its own: every server parity talks to (an SGLang server, the router in front of a PD pair,
the reference engine) answers the same SGLang API, and the request must be exactly the kit's — greedy,
`ignore_eos`, logprobs with top-5 — plus `logprob_start_len` so that the prompt's own logprobs (the prefill
logits) come back for attribution.
"""

from __future__ import annotations

from typing import Any

import requests

from pdctl.errors import CheckFailed
from pdctl.parity.prompts import Prompt

GENERATE_TIMEOUT_S = 300.0
FLUSH_TIMEOUT_S = 60.0


def generate_body(prompt: Prompt, *, max_new_tokens: int, logprob_start_len: int = 0) -> dict[str, Any]:
    """The /generate body the kit sends, with logprobs from LOGPROB_START_LEN on (0 = the whole prompt)."""
    return {
        **prompt.payload(),
        "sampling_params": {"temperature": 0, "max_new_tokens": max_new_tokens, "ignore_eos": True},
        "return_logprob": True,
        "top_logprobs_num": 5,
        "logprob_start_len": logprob_start_len,
    }


def generate(url: str, prompt: Prompt, *, max_new_tokens: int, logprob_start_len: int = 0) -> dict[str, Any]:
    """POST /generate and return its meta_info (plus output_ids); a server error fails the check (exit 1)."""
    body = generate_body(prompt, max_new_tokens=max_new_tokens, logprob_start_len=logprob_start_len)
    try:
        response = requests.post(url.rstrip("/") + "/generate", json=body, timeout=GENERATE_TIMEOUT_S)
    except requests.RequestException as exc:
        raise CheckFailed(f"{url}: /generate for prompt {prompt.name} failed: {exc}") from exc
    if response.status_code != 200:
        raise CheckFailed(
            f"{url}: /generate for prompt {prompt.name} answered HTTP {response.status_code}",
            detail=response.text[-2000:],
        )
    try:
        doc = response.json()
    except ValueError as exc:
        raise CheckFailed(f"{url}: /generate answered a body that is not JSON") from exc
    if isinstance(doc, list):  # batch-shaped answers: one prompt was sent
        doc = doc[0] if doc else {}
    meta = dict(doc.get("meta_info") or {})
    if "output_token_logprobs" not in meta:
        raise CheckFailed(f"{url}: /generate answered without output_token_logprobs (return_logprob ignored?)")
    meta.setdefault("output_ids", doc.get("output_ids"))
    return meta


def flush_cache(url: str) -> None:
    """Empty a server's prefix cache (POST /flush_cache, waiting up to 30 s for running requests to end)."""
    try:
        response = requests.post(url.rstrip("/") + "/flush_cache", params={"timeout": 30}, timeout=FLUSH_TIMEOUT_S)
    except requests.RequestException as exc:
        raise CheckFailed(f"{url}: /flush_cache failed: {exc}") from exc
    if response.status_code != 200:
        raise CheckFailed(f"{url}: /flush_cache answered HTTP {response.status_code}", detail=response.text[-500:])
