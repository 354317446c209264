"""OpenAI-compatible /v1/completions and /v1/chat/completions on top of the /generate machinery, streamed
(`stream: true`: one chunk per token, OpenAI's chunk shapes as SGLang emits them, a usage chunk when
`stream_options.include_usage`) or not."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

from pdctl.reference.http.sglang_api import (
    TOK,
    ApiError,
    chat_prompt,
    output_text,
    parse_sampling,
    streamed_text,
)
from pdctl.reference.request import GenRequest


def _sampling(body: dict[str, Any], default_max: int) -> dict[str, Any]:
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens", default_max))
    sp: dict[str, Any] = {"max_new_tokens": max_tokens}
    for src, dst in (("temperature", "temperature"), ("top_p", "top_p"), ("top_k", "top_k"), ("stop", "stop"),
                     ("seed", "sampling_seed"), ("ignore_eos", "ignore_eos")):
        if body.get(src) is not None:
            sp[dst] = body[src]
    return sp


def parse_completion(body: Any, context_length: int, chat: bool) -> GenRequest:
    """A GenRequest for an OpenAI completions / chat body."""
    if not isinstance(body, dict):
        raise ApiError("request body must be a JSON object")
    if chat:
        ids = TOK.encode(chat_prompt(body.get("messages")))
        top = body.get("top_logprobs") or 0
        want_lp = bool(body.get("logprobs"))
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list) and len(prompt) == 1 and isinstance(prompt[0], str):
            prompt = prompt[0]
        if isinstance(prompt, str):
            ids = TOK.encode(prompt)
        elif isinstance(prompt, list) and prompt and all(isinstance(i, int) and TOK.is_valid_id(i) for i in prompt):
            ids = list(prompt)
        else:
            raise ApiError("prompt must be a string or a list of token ids (one prompt per request)")
        lp = body.get("logprobs")
        want_lp, top = lp is not None and lp is not False, int(lp or 0)
    if not isinstance(top, int) or top < 0:
        raise ApiError("top_logprobs / logprobs must be a non-negative integer")
    if len(ids) >= context_length:
        raise ApiError(
            f"The input ({len(ids)} tokens) is longer than the model's context length ({context_length} tokens)."
        )
    sp = parse_sampling(_sampling(body, 16 if not chat else 128), where="")
    sp.max_new_tokens = min(sp.max_new_tokens, context_length - len(ids))
    boot = {k: body.get(k) for k in ("bootstrap_host", "bootstrap_port", "bootstrap_room")}
    return GenRequest(rid=str(body.get("rid") or uuid.uuid4().hex), input_ids=ids, sampling=sp,
                      return_logprob=want_lp, top_logprobs_num=top, return_text_in_logprobs=True, **boot)


def _finish(req: GenRequest) -> tuple[str, Any]:
    fr = req.finish or {}
    return ("stop" if fr.get("type") == "stop" else "length"), fr.get("matched")


def _usage(req: GenRequest) -> dict[str, Any]:
    n = len(req.output_ids)
    return {"prompt_tokens": req.prompt_len, "completion_tokens": n, "total_tokens": req.prompt_len + n,
            "prompt_tokens_details": {"cached_tokens": req.cached_tokens}}


def _completion_logprobs(req: GenRequest, lo: int = 0, hi: int | None = None) -> dict[str, Any]:
    """OpenAI completions logprobs of output tokens [LO, HI)."""
    ids = req.output_ids[lo:hi]
    toks = [TOK.token_text(t) for t in ids]
    offsets, pos = [], 0
    for t in toks:
        offsets.append(pos)
        pos += len(t)
    return {
        "tokens": toks,
        "token_logprobs": list(req.output_logprobs[lo:hi]),
        "top_logprobs": [{TOK.token_text(i): lp for lp, i in top} for top in req.output_top[lo:hi]],
        "text_offset": offsets,
    }


def _chat_logprobs(req: GenRequest, lo: int = 0, hi: int | None = None) -> dict[str, Any]:
    """OpenAI chat logprobs ({"content": [...]}) of output tokens [LO, HI)."""
    content = []
    for tid, lp, top in zip(req.output_ids[lo:hi], req.output_logprobs[lo:hi], req.output_top[lo:hi]):
        text = TOK.token_text(tid)
        content.append({
            "token": text, "logprob": lp, "bytes": list(text.encode("utf-8")),
            "top_logprobs": [{"token": TOK.token_text(i), "logprob": v, "bytes": list(TOK.token_text(i).encode())}
                             for v, i in top],
        })
    return {"content": content}


def completion_response(req: GenRequest, model: str) -> dict[str, Any]:
    """OpenAI text_completion document."""
    reason, matched = _finish(req)
    logprobs = _completion_logprobs(req) if req.return_logprob else None
    return {
        "id": f"cmpl-{req.rid}", "object": "text_completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "text": output_text(req), "logprobs": logprobs, "finish_reason": reason,
                     "matched_stop": matched}],
        "usage": _usage(req),
    }


def chat_response(req: GenRequest, model: str) -> dict[str, Any]:
    """OpenAI chat.completion document."""
    reason, matched = _finish(req)
    logprobs = _chat_logprobs(req) if req.return_logprob else None
    return {
        "id": f"chatcmpl-{req.rid}", "object": "chat.completion", "created": int(time.time()), "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": output_text(req)},
                     "logprobs": logprobs, "finish_reason": reason, "matched_stop": matched}],
        "usage": _usage(req),
    }


class OpenAIStream:
    """The chunks of one streamed completion (CHAT or not): `chunks(tokens, done)` per token event, then
    `final()` (the usage chunk when asked for). Text deltas come from the cumulative text, so an unfinished
    UTF-8 character or a possible stop string is held back until it is settled."""

    def __init__(self, req: GenRequest, model: str, *, chat: bool, include_usage: bool) -> None:
        self.req, self.model, self.chat, self.include_usage = req, model, chat, include_usage
        self.id = f"{'chatcmpl' if chat else 'cmpl'}-{req.rid}"
        self.created = int(time.time())
        self.sent_text = 0  # characters of text already sent
        self.sent_tokens = 0  # tokens whose logprobs were sent
        self.started = False

    def _chunk(self, choice: dict[str, Any], usage: Any = None, choices: list[Any] | None = None) -> str:
        doc = {"id": self.id, "object": "chat.completion.chunk" if self.chat else "text_completion",
               "created": self.created, "model": self.model,
               "choices": [choice] if choices is None else choices, "usage": usage}
        return f"data: {json.dumps(doc)}\n\n"

    def chunks(self, tokens: int, done: bool) -> list[str]:
        """The chunks for the request having TOKENS output tokens (DONE: it finished)."""
        req, out = self.req, []
        text = output_text(req) if done else streamed_text(req, tokens)
        delta = text[self.sent_text:]
        self.sent_text = max(self.sent_text, len(text))
        logprobs = None
        if req.return_logprob and tokens > self.sent_tokens:
            make = _chat_logprobs if self.chat else _completion_logprobs
            logprobs = make(req, self.sent_tokens, tokens)
            self.sent_tokens = tokens
        reason, matched = _finish(req) if done else (None, None)
        if self.chat:
            if not self.started:  # SGLang's first chat chunk carries the role
                out.append(self._chunk({"index": 0, "delta": {"role": "assistant", "content": ""},
                                        "logprobs": None, "finish_reason": None, "matched_stop": None}))
            if delta or logprobs:
                out.append(self._chunk({"index": 0, "delta": {"role": None, "content": delta},
                                        "logprobs": logprobs, "finish_reason": None, "matched_stop": None}))
            if done:
                out.append(self._chunk({"index": 0, "delta": {}, "logprobs": None, "finish_reason": reason,
                                        "matched_stop": matched}))
        elif delta or logprobs or done:
            out.append(self._chunk({"index": 0, "text": delta, "logprobs": logprobs, "finish_reason": reason,
                                    "matched_stop": matched}))
        self.started = True
        return out

    def final(self) -> list[str]:
        """The usage chunk (`stream_options.include_usage`), with empty choices, as OpenAI sends it."""
        if not self.include_usage:
            return []
        return [self._chunk({}, usage=_usage(self.req), choices=[])]
