"""HTTP request parsing and response shapes of SGLang's own API (/generate), streamed or not.

Pure functions over JSON documents, so the FastAPI layer only routes. Bad input raises ApiError(400) with a
message that says what is wrong; the server answers `{"error": {"message", "type", "code"}}` as SGLang does.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from pdctl.reference.request import GenRequest
from pdctl.reference.sampling import SamplingParams
from pdctl.reference.tokenizer import ByteTokenizer

TOK = ByteTokenizer()


class ApiError(Exception):
    """An HTTP error with a clear message (400 for bad requests)."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


def error_body(message: str, status: int) -> dict[str, Any]:
    """SGLang/OpenAI-style error document."""
    kind = "BadRequestError" if status == 400 else "InternalServerError" if status >= 500 else "Error"
    return {"error": {"message": message, "type": kind, "code": status}, "object": "error", "message": message}


def _num(doc: dict[str, Any], key: str, typ: type, default: Any, where: str) -> Any:
    val = doc.get(key, default)
    if val is None:
        return default
    if typ is float and isinstance(val, int) and not isinstance(val, bool):
        val = float(val)
    if not isinstance(val, typ) or isinstance(val, bool) and typ is not bool:
        raise ApiError(f"{where}{key} must be {typ.__name__}, got {val!r}")
    return val


def parse_sampling(doc: Any, where: str = "sampling_params.") -> SamplingParams:
    """Validate SGLang sampling_params (unknown keys are ignored, as SGLang's defaults would apply)."""
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ApiError("sampling_params must be an object")
    sp = SamplingParams(
        max_new_tokens=_num(doc, "max_new_tokens", int, 128, where),
        temperature=_num(doc, "temperature", float, 1.0, where),
        top_p=_num(doc, "top_p", float, 1.0, where),
        top_k=_num(doc, "top_k", int, -1, where),
        ignore_eos=_num(doc, "ignore_eos", bool, False, where),
        seed=_num(doc, "sampling_seed", int, None, where),
    )
    stop = doc.get("stop")
    if isinstance(stop, str):
        stop = [stop]
    if stop is not None and not (isinstance(stop, list) and all(isinstance(s, str) for s in stop)):
        raise ApiError(f"{where}stop must be a string or a list of strings")
    sp.stop = list(stop or [])
    ids = doc.get("stop_token_ids") or []
    if not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
        raise ApiError(f"{where}stop_token_ids must be a list of integers")
    sp.stop_token_ids = ids
    if sp.max_new_tokens < 0:
        raise ApiError(f"{where}max_new_tokens must be >= 0, got {sp.max_new_tokens}")
    if sp.temperature < 0:
        raise ApiError(f"{where}temperature must be >= 0, got {sp.temperature}")
    if not 0 < sp.top_p <= 1:
        raise ApiError(f"{where}top_p must be in (0, 1], got {sp.top_p}")
    return sp


def _pick(val: Any, i: int, n: int, name: str) -> Any:
    if isinstance(val, list) and name != "input_ids_item":
        if len(val) != n:
            raise ApiError(f"{name} has {len(val)} entries but the batch has {n}")
        return val[i]
    return val


def _int_field(body: dict[str, Any], key: str, default: int, i: int, n: int) -> int:
    val = _pick(body.get(key), i, n, key)
    if val is None:
        return default
    if not isinstance(val, int) or isinstance(val, bool):
        raise ApiError(f"{key} must be an integer, got {val!r}")
    return val


def parse_generate(body: Any, context_length: int) -> tuple[list[GenRequest], bool]:
    """GenRequests of a /generate body, and whether it was a batch (list response)."""
    if not isinstance(body, dict):
        raise ApiError("request body must be a JSON object")
    text, input_ids = body.get("text"), body.get("input_ids")
    if text is None and input_ids is None:
        raise ApiError("either text or input_ids must be provided")
    if text is not None and input_ids is not None:
        raise ApiError("provide text or input_ids, not both")
    if text is not None:
        batch = isinstance(text, list)
        texts = text if batch else [text]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise ApiError("text must be a non-empty string or a list of strings")
        prompts = [TOK.encode(t) for t in texts]
    else:
        batch = isinstance(input_ids, list) and bool(input_ids) and isinstance(input_ids[0], list)
        prompts = input_ids if batch else [input_ids]
        for p in prompts:
            if not isinstance(p, list) or not p or not all(isinstance(i, int) and TOK.is_valid_id(i) for i in p):
                raise ApiError(f"input_ids must be a non-empty list of token ids in [0, {TOK.vocab_size})")
    n = len(prompts)
    rid = body.get("rid")
    reqs = []
    for i, ids in enumerate(prompts):
        if len(ids) >= context_length:
            raise ApiError(
                f"The input ({len(ids)} tokens) is longer than the model's context length ({context_length} tokens)."
            )
        sp = parse_sampling(_pick(body.get("sampling_params"), i, n, "sampling_params"))
        sp.max_new_tokens = min(sp.max_new_tokens, context_length - len(ids))
        r = _pick(rid, i, n, "rid")
        req = GenRequest(
            rid=str(r) if r is not None else uuid.uuid4().hex,
            input_ids=list(ids),
            sampling=sp,
            return_logprob=bool(_pick(body.get("return_logprob", False), i, n, "return_logprob")),
            logprob_start_len=_int_field(body, "logprob_start_len", -1, i, n),
            top_logprobs_num=_int_field(body, "top_logprobs_num", 0, i, n),
            return_text_in_logprobs=bool(body.get("return_text_in_logprobs", False)),
            bootstrap_host=_pick(body.get("bootstrap_host"), i, n, "bootstrap_host"),
            bootstrap_port=_pick(body.get("bootstrap_port"), i, n, "bootstrap_port"),
            bootstrap_room=_pick(body.get("bootstrap_room"), i, n, "bootstrap_room"),
        )
        if req.top_logprobs_num < 0:
            raise ApiError(f"top_logprobs_num must be >= 0, got {req.top_logprobs_num}")
        if req.logprob_start_len >= len(ids) + 1:
            raise ApiError(f"logprob_start_len={req.logprob_start_len} is higher than the number of input tokens")
        reqs.append(req)
    return reqs, batch


def _entry(lp: float | None, tid: int, with_text: bool) -> list[Any]:
    return [lp, tid, TOK.token_text(tid) if with_text else None]


def _top(top: list[tuple[float, int]] | None, with_text: bool) -> list[list[Any]] | None:
    return None if top is None else [_entry(lp, tid, with_text) for lp, tid in top]


def output_text(req: GenRequest) -> str:
    """Generated text: special tokens skipped, cut before a matched stop string."""
    text = TOK.decode(req.output_ids)
    return text[: req.stop_text_index] if req.stop_text_index is not None else text


def _complete_utf8(data: bytes) -> int:
    """Length of DATA without a trailing UTF-8 sequence that more bytes could still complete."""
    for back in range(1, min(4, len(data)) + 1):
        c = data[-back]
        if c & 0xC0 == 0x80:  # a continuation byte: look further back for the lead byte
            continue
        need = 2 if c >> 5 == 0b110 else 3 if c >> 4 == 0b1110 else 4 if c >> 3 == 0b11110 else 1
        return len(data) - back if need > back else len(data)
    return len(data)


def streamed_text(req: GenRequest, tokens: int) -> str:
    """The text of REQ's first TOKENS output tokens as a stream may show it before the end: an unfinished
    UTF-8 character and anything that could still become a stop string are held back (SGLang's detokenizer
    does the same), so that every later text extends this one."""
    data = bytes(i for i in req.output_ids[:tokens] if 0 <= i < 256)
    text = data[: _complete_utf8(data)].decode("utf-8", errors="replace")
    hold = max((len(s) for s in req.sampling.stop), default=1) - 1
    return text[: len(text) - hold] if hold > 0 else text


def generate_response(req: GenRequest, input_logprobs: bool = True, upto: int | None = None) -> dict[str, Any]:
    """SGLang's /generate response for a finished request; with UPTO, a streamed event of its first UPTO
    output tokens (cumulative text, output_ids and logprobs, finish_reason null), SGLang's stream format."""
    n = len(req.output_ids) if upto is None else upto
    meta: dict[str, Any] = {
        "id": req.rid,
        "finish_reason": req.finish if upto is None else None,
        "prompt_tokens": req.prompt_len,
        "completion_tokens": n,
        "cached_tokens": req.cached_tokens,
        "e2e_latency": round(time.monotonic() - req.created, 6),
    }
    if req.return_logprob:
        wt = req.return_text_in_logprobs
        ids = req.input_ids[req.logprob_start :] if input_logprobs else []
        meta["input_token_logprobs"] = [_entry(lp, t, wt) for lp, t in zip(req.input_logprobs, ids)]
        meta["output_token_logprobs"] = [
            _entry(lp, t, wt) for lp, t in zip(req.output_logprobs[:n], req.output_ids[:n])
        ]
        if req.top_logprobs_num > 0:
            meta["input_top_logprobs"] = [_top(t, wt) for t in req.input_top] if input_logprobs else []
            meta["output_top_logprobs"] = [_top(t, wt) for t in req.output_top[:n]]
    text = output_text(req) if upto is None else streamed_text(req, n)
    return {"text": text, "output_ids": list(req.output_ids[:n]), "meta_info": meta}


def chat_prompt(messages: Any) -> str:
    """The reference chat template: `<|role|>\\ncontent\\n` per message, then `<|assistant|>\\n`."""
    if not isinstance(messages, list) or not messages:
        raise ApiError("messages must be a non-empty list")
    parts = []
    for m in messages:
        if not isinstance(m, dict) or not isinstance(m.get("role"), str):
            raise ApiError("each message needs a role and a content")
        content = m.get("content", "")
        if isinstance(content, list):  # OpenAI content parts
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        if not isinstance(content, str):
            raise ApiError("message content must be a string")
        parts.append(f"<|{m['role']}|>\n{content}\n")
    return "".join(parts) + "<|assistant|>\n"
