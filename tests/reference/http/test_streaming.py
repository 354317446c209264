"""`stream: true` over real HTTP: one server-sent event per token, in SGLang's /generate format and OpenAI's
chunk format (what SGLang's bench_serving, aiperf and genai-perf parse), errors, and client disconnects."""

from __future__ import annotations

import json

import pytest
import requests

from tests.support.net import wait_for

pytestmark = pytest.mark.e2e
TIMEOUT = 60


def sse(response: requests.Response) -> list:
    """The `data:` payloads of an event stream, line by line as bench clients read it ("[DONE]" kept as text)."""
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/event-stream")
    out = []
    for line in response.iter_lines(decode_unicode=True):
        if line.startswith("data: "):
            payload = line[len("data: "):]
            out.append(payload if payload == "[DONE]" else json.loads(payload))
        else:
            assert line == "", line  # events are separated by blank lines, nothing else
    return out


def test_generate_streams_one_cumulative_event_per_token(server):
    body = {"text": "Streaming, one token at a time: ", "return_logprob": True,
            "sampling_params": {"max_new_tokens": 12, "temperature": 0, "ignore_eos": True}}
    whole = requests.post(server.url + "/generate", json=body, timeout=TIMEOUT).json()
    r = requests.post(server.url + "/generate", json=body | {"stream": True}, timeout=TIMEOUT, stream=True)
    events = sse(r)
    assert events[-1] == "[DONE]" and len(events) == 12 + 1
    docs = events[:-1]
    assert [d["meta_info"]["completion_tokens"] for d in docs] == list(range(1, 13))
    for i, d in enumerate(docs):  # cumulative, as SGLang streams by default
        assert d["output_ids"] == whole["output_ids"][: i + 1]
        assert len(d["meta_info"]["output_token_logprobs"]) == i + 1
        assert d["meta_info"]["finish_reason"] is None if i < 11 else d["meta_info"]["finish_reason"]
    assert docs[-1]["text"] == whole["text"] and docs[-1]["output_ids"] == whole["output_ids"]
    assert docs[-1]["meta_info"]["finish_reason"] == {"type": "length", "length": 12}
    assert docs[-1]["meta_info"]["output_token_logprobs"] == whole["meta_info"]["output_token_logprobs"]
    assert all(whole["text"].startswith(d["text"]) for d in docs)  # every text extends the previous one


def test_completions_stream_in_openai_chunks_with_usage(server):
    body = {"model": "x", "prompt": "OpenAI streaming", "max_tokens": 9, "temperature": 0, "ignore_eos": True}
    whole = requests.post(server.url + "/v1/completions", json=body, timeout=TIMEOUT).json()
    chunks = sse(requests.post(server.url + "/v1/completions", timeout=TIMEOUT, stream=True,
                               json=body | {"stream": True, "stream_options": {"include_usage": True}}))
    assert chunks[-1] == "[DONE]"
    usage = chunks[-2]
    assert usage["choices"] == [] and usage["usage"]["completion_tokens"] == 9
    assert usage["usage"]["prompt_tokens"] == whole["usage"]["prompt_tokens"]
    text_chunks = chunks[:-2]
    assert all(c["object"] == "text_completion" and c["id"] == text_chunks[0]["id"] for c in text_chunks)
    assert "".join(c["choices"][0]["text"] for c in text_chunks) == whole["choices"][0]["text"]
    assert [c["choices"][0]["finish_reason"] for c in text_chunks][-1] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in text_chunks[:-1])
    plain = sse(requests.post(server.url + "/v1/completions", json=body | {"stream": True}, timeout=TIMEOUT,
                              stream=True))
    assert all(c == "[DONE]" or c["choices"] for c in plain)  # no usage chunk unless asked for


def test_chat_stream_starts_with_the_role_and_ends_with_finish_reason(server):
    body = {"model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 6, "temperature": 0,
            "ignore_eos": True, "logprobs": True}
    whole = requests.post(server.url + "/v1/chat/completions", json=body, timeout=TIMEOUT).json()
    chunks = sse(requests.post(server.url + "/v1/chat/completions", json=body | {"stream": True},
                               timeout=TIMEOUT, stream=True))
    assert chunks[-1] == "[DONE]"
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-2]["choices"][0]["finish_reason"] == "length" and chunks[-2]["choices"][0]["delta"] == {}
    body_chunks = chunks[1:-2]
    content = "".join(c["choices"][0]["delta"]["content"] for c in body_chunks)
    assert content == whole["choices"][0]["message"]["content"]
    tokens = [t for c in body_chunks for t in (c["choices"][0]["logprobs"] or {}).get("content", [])]
    assert [t["logprob"] for t in tokens] == [t["logprob"] for t in whole["choices"][0]["logprobs"]["content"]]


def test_stream_errors_and_disconnects(server):
    # a request refused before its first token gets an HTTP error, as without streaming
    r = requests.post(server.url + "/generate", timeout=TIMEOUT,
                      json={"text": "x" * 2000, "stream": True, "sampling_params": {"max_new_tokens": 4}})
    assert r.status_code == 400 and "context length" in r.json()["error"]["message"]
    # a client that leaves mid-stream aborts its request: the server stops decoding for nobody
    def state() -> dict:
        return requests.get(server.url + "/server_info", timeout=TIMEOUT).json()["internal_states"][0]

    steps = state()["steps"]
    body = {"text": "a long answer", "stream": True, "sampling_params": {"max_new_tokens": 1000, "ignore_eos": True}}
    with requests.post(server.url + "/generate", json=body, timeout=TIMEOUT, stream=True) as r:
        lines = r.iter_lines()
        assert next(line for line in lines if line).startswith(b"data: ")
    wait_for(lambda: state()["num_running_reqs"] == 0, timeout=60, what="the abandoned stream's request to end")
    assert state()["steps"] - steps < 500  # stopped long before its 1000 tokens
