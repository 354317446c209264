"""One eval request over SGLang's native or OpenAI-compatible API, with bounded retries.

Why retries here: a PD deployment drops the odd request (a prefill restarting, a router 503 while a worker
is unhealthy); one lost request should not sink a 1319-question eval, but a request that keeps failing must
end as a recorded error rather than loop forever. Connection errors, timeouts, 429 and 5xx are retried with
exponential backoff; other 4xx (a prompt over the context length) are the request's fault and fail at once.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import httpx

from pdctl.clip import clip
from pdctl.errors import UserError

#: --api value -> endpoint path.
API_PATHS: dict[str, str] = {"generate": "/generate", "completion": "/v1/completions", "chat": "/v1/chat/completions"}


@dataclass(frozen=True)
class RequestConfig:
    """How every request of an eval is sent."""

    url: str
    api: str = "generate"
    max_new_tokens: int = 512
    model: str | None = None
    timeout_s: float = 600.0
    retries: int = 3
    backoff_s: float = 0.5
    stop: tuple[str, ...] = ()  # the eval's stop strings (pdctl.evals.base.Eval.stop)


@dataclass(frozen=True)
class Completion:
    """A successful answer: the generated text and what the server reported about it."""

    text: str
    completion_tokens: int
    prompt_tokens: int | None
    finish_reason: str | None
    attempts: int
    latency_s: float
    reasoning: str | None = None


class RequestFailed(Exception):
    """The request still failed after its retries (or failed in a way retrying cannot fix)."""

    def __init__(self, message: str, attempts: int, history: list[str] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.attempts = attempts
        # Every attempt's failure: the first is often the cause (later ones can be a router's circuit breaker).
        self.history = history or [message]


def build_body(cfg: RequestConfig, prompt: str) -> dict[str, Any]:
    """The JSON body for PROMPT on cfg.api: greedy, cfg.max_new_tokens, the eval's stop strings.

    The chat API gets the prompt as one user message and no stop strings, as SGLang's run_eval does (a
    chat template already ends the turn; "Question" would cut a reasoning model's analysis short).
    """
    if cfg.api == "generate":
        return {
            "text": prompt,
            "sampling_params": {"temperature": 0.0, "max_new_tokens": cfg.max_new_tokens, "stop": list(cfg.stop)},
        }
    body: dict[str, Any] = {"temperature": 0.0, "max_tokens": cfg.max_new_tokens}
    if cfg.model:
        body["model"] = cfg.model
    if cfg.api == "completion":
        body.update(prompt=prompt, stop=list(cfg.stop))
    elif cfg.api == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
    else:
        raise UserError(f"--api must be one of {', '.join(API_PATHS)}, got {cfg.api!r}")
    return body


def _finish_reason(value: Any) -> str | None:
    if isinstance(value, dict):  # SGLang native: {"type": "stop", "matched": ...}
        value = value.get("type")
    return None if value is None else str(value)


def parse_response(api: str, doc: Any) -> tuple[str, int, int | None, str | None, str | None]:
    """(text, completion_tokens, prompt_tokens, finish_reason, reasoning) of a response; ValueError if malformed."""
    if not isinstance(doc, dict):
        raise TypeError("response is not a JSON object")
    if api == "generate":
        if isinstance(doc.get("text"), list):  # a batched reply to a single prompt: take the first
            doc = {**doc, "text": doc["text"][0]}
        meta = doc.get("meta_info") or {}
        text = doc.get("text")
        if not isinstance(text, str):
            raise ValueError("no 'text' in /generate response")
        tokens = meta.get("completion_tokens")
        if tokens is None:
            tokens = len(doc.get("output_ids") or [])
        return text, int(tokens), meta.get("prompt_tokens"), _finish_reason(meta.get("finish_reason")), None
    choices = doc.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        raise ValueError("no 'choices' in response")
    choice = choices[0]
    reasoning = None
    if api == "chat":
        message = choice.get("message") or {}
        text = message.get("content") or ""
        reasoning = message.get("reasoning_content")
    else:
        text = choice.get("text")
        if not isinstance(text, str):
            raise ValueError("no 'text' in completion choice")
    usage = doc.get("usage") or {}
    return text, int(usage.get("completion_tokens") or 0), usage.get("prompt_tokens"), _finish_reason(
        choice.get("finish_reason")
    ), reasoning


def _retryable_status(status: int) -> bool:
    return status == 429 or status >= 500


async def complete(client: httpx.AsyncClient, cfg: RequestConfig, prompt: str,
                   give_up: Callable[[str], Awaitable[str | None]] | None = None) -> Completion:
    """Send PROMPT; retry transient failures up to cfg.retries times; raise RequestFailed when out of tries.
    GIVE_UP, asked after each transient failure, returns why retrying is pointless (a dead worker), or None."""
    url = cfg.url.rstrip("/") + API_PATHS[cfg.api]
    body = build_body(cfg, prompt)
    attempts = 0
    last = ""
    history: list[str] = []
    start = time.monotonic()
    while True:
        attempts += 1
        retryable = True
        try:
            resp = await client.post(url, json=body, timeout=cfg.timeout_s)
            if resp.status_code == 200:
                text, tokens, prompt_tokens, finish, reasoning = parse_response(cfg.api, resp.json())
                return Completion(text, tokens, prompt_tokens, finish, attempts, time.monotonic() - start, reasoning)
            retryable = _retryable_status(resp.status_code)
            last = f"HTTP {resp.status_code}: {clip(resp.text, 300)}"
        except httpx.TimeoutException:
            last = f"timed out after {cfg.timeout_s:g} s"
        except httpx.TransportError as exc:  # refused, reset, dropped mid-response
            last = f"{type(exc).__name__}: {exc}".rstrip(": ")
        except httpx.HTTPError as exc:  # anything else httpx raises (decoding, redirects): not transient
            last, retryable = f"{type(exc).__name__}: {exc}", False
        except (ValueError, TypeError) as exc:  # not JSON, or JSON without the fields we need
            last, retryable = f"bad response: {exc}", False
        history.append(last)
        if not retryable or attempts > cfg.retries:
            raise RequestFailed(last, attempts, history)
        why = await give_up(last) if give_up is not None else None
        if why:
            raise RequestFailed(f"{last} ({why})", attempts, history)
        delay = min(cfg.backoff_s * 2 ** (attempts - 1), 8.0)
        await asyncio.sleep(delay * (0.5 + random.random() / 2))


def check_reachable(url: str, timeout_s: float = 10.0) -> None:
    """Fail fast (UserError, exit 2) when nothing answers HTTP at URL; any HTTP status counts as reachable."""
    try:
        httpx.get(url.rstrip("/") + "/health", timeout=timeout_s)
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise UserError(f"cannot reach {url}: {type(exc).__name__}: {exc}".rstrip(": ")) from exc
    except httpx.HTTPError:
        pass  # connected but slow or odd: the requests themselves will tell (and be retried)


# What the CPU reference engine reports as its model_type (pdctl.reference.config.MODEL_TYPE): its checkpoints
# are seeded random weights (`pdctl reference init-checkpoint`), never trained.
REFERENCE_MODEL_TYPE = "pdctl-reference"
RANDOM_WEIGHTS_NOTE = ("the deployment serves pdctl's CPU reference engine, whose checkpoints are seeded random "
                       "weights (`pdctl reference init-checkpoint`): accuracy near 0 is expected there. This eval "
                       "checks the serving path (every request answered, counts, latency), not the model; run it "
                       "against a real model for accuracy")


def serves_random_weights(url: str, timeout_s: float = 10.0) -> bool:
    """Whether URL serves the reference engine's random weights: its /model_info, or (sglang-router 0.3.x
    forwards only the older name) /get_model_info, says model_type pdctl-reference."""
    for path in ("/model_info", "/get_model_info"):
        try:
            resp = httpx.get(url.rstrip("/") + path, timeout=timeout_s)
            doc = resp.json() if resp.status_code == 200 else None
        except (httpx.HTTPError, ValueError):
            continue
        if isinstance(doc, dict):
            return doc.get("model_type") == REFERENCE_MODEL_TYPE
    return False


def discover_model(url: str, timeout_s: float = 10.0) -> str | None:
    """The first model id of URL's /v1/models (the OpenAI APIs' `model` field), or None if it has none."""
    try:
        resp = httpx.get(url.rstrip("/") + "/v1/models", timeout=timeout_s)
        data = resp.json().get("data") if resp.status_code == 200 else None
        if data and isinstance(data[0], dict) and data[0].get("id"):
            return str(data[0]["id"])
    except (httpx.HTTPError, ValueError, AttributeError):
        pass
    return None
