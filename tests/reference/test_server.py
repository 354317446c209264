"""The reference server over real HTTP: SGLang response shapes, cache, concurrency, bad input, shutdown."""

from __future__ import annotations

import signal
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import requests

from tests.support.servers import wait_exit

pytestmark = pytest.mark.e2e
TIMEOUT = 60


def gen(server, text, n=16, **kw):
    body = {"text": text, "sampling_params": {"max_new_tokens": n, "temperature": 0, **kw.pop("sp", {})}, **kw}
    r = requests.post(server.url + "/generate", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()


def test_generate_response_shape_and_logprobs(server):
    out = gen(server, "Hello, reference engine!", n=8, return_logprob=True, logprob_start_len=0,
              top_logprobs_num=3, return_text_in_logprobs=True)
    meta = out["meta_info"]
    assert len(out["output_ids"]) == meta["completion_tokens"] == 8
    assert meta["prompt_tokens"] == len("Hello, reference engine!") + 1
    assert meta["finish_reason"] == {"type": "length", "length": 8}
    assert meta["input_token_logprobs"][0] == [None, 256, "<s>"]
    assert [e[1] for e in meta["input_token_logprobs"][1:]] == list(b"Hello, reference engine!")
    assert [e[1] for e in meta["output_token_logprobs"]] == out["output_ids"]
    for (lp, tid, text), top in zip(meta["output_token_logprobs"], meta["output_top_logprobs"]):
        assert len(top) == 3 and top[0][1] == tid and top[0][0] == lp  # greedy: the chosen token is the best
        assert top[0][0] >= top[1][0] >= top[2][0]
        assert text == bytes([tid]).decode("utf-8", errors="replace")
    assert out["text"] == bytes(out["output_ids"]).decode("utf-8", errors="replace")
    plain = gen(server, "Hello, reference engine!", n=8, return_logprob=True)
    assert plain["meta_info"]["input_token_logprobs"] == []
    assert all(e[2] is None for e in plain["meta_info"]["output_token_logprobs"])


def test_stop_strings_eos_and_batches(server):
    free = gen(server, "Stop strings end generation early. ", n=40, sp={"ignore_eos": True})
    text = free["text"]
    stop = text[10:12]
    cut = gen(server, "Stop strings end generation early. ", n=40, sp={"stop": [stop]})
    assert cut["meta_info"]["finish_reason"] == {"type": "stop", "matched": stop}
    assert cut["text"] == text[: text.index(stop)]
    tid = free["output_ids"][5]
    by_id = gen(server, "Stop strings end generation early. ", n=40, sp={"stop_token_ids": [tid]})
    assert by_id["output_ids"][-1] == tid and by_id["meta_info"]["finish_reason"]["type"] == "stop"
    batch = requests.post(server.url + "/generate", timeout=TIMEOUT, json={
        "text": ["one", "two"], "sampling_params": {"max_new_tokens": 4, "temperature": 0}}).json()
    assert isinstance(batch, list) and len(batch) == 2
    assert batch[0]["output_ids"] == gen(server, "one", n=4)["output_ids"]


def test_sampling_seed_reproducible(server):
    a = gen(server, "seeded", n=20, sp={"temperature": 0.9, "sampling_seed": 5})
    b = gen(server, "seeded", n=20, sp={"temperature": 0.9, "sampling_seed": 5})
    assert a["output_ids"] == b["output_ids"]


def test_prefix_cache_cold_warm_identical_and_flush(server):
    prompt = "A long shared prefix that spans several pages and crosses the sliding window. " * 2
    requests.post(server.url + "/flush_cache", timeout=TIMEOUT).raise_for_status()
    cold = gen(server, prompt, n=24, return_logprob=True)
    warm = gen(server, prompt, n=24, return_logprob=True)
    assert cold["meta_info"]["cached_tokens"] == 0
    assert warm["meta_info"]["cached_tokens"] == (len(prompt) + 1 - 1) // 16 * 16
    assert warm["output_ids"] == cold["output_ids"]
    assert warm["meta_info"]["output_token_logprobs"] == cold["meta_info"]["output_token_logprobs"]
    assert requests.get(server.url + "/flush_cache", timeout=TIMEOUT).status_code == 200
    again = gen(server, prompt, n=24, return_logprob=True)
    assert again["meta_info"]["cached_tokens"] == 0 and again["output_ids"] == cold["output_ids"]


def test_64_concurrent_requests_equal_sequential(server):
    prompts = [f"Request number {i}: " + "x" * (i % 40) for i in range(64)]
    body = lambda p: {"text": p, "sampling_params": {"max_new_tokens": 12, "temperature": 0}, "return_logprob": True}

    def post(p):
        r = requests.post(server.url + "/generate", json=body(p), timeout=TIMEOUT)
        assert r.status_code == 200, r.text
        return r.json()

    with ThreadPoolExecutor(64) as pool:
        together = list(pool.map(post, prompts))
    one_by_one = [post(p) for p in prompts]
    for a, b in zip(together, one_by_one):
        assert a["output_ids"] == b["output_ids"]
        assert a["meta_info"]["output_token_logprobs"] == b["meta_info"]["output_token_logprobs"]


@pytest.mark.parametrize(
    "body, needle",
    [
        ({"sampling_params": {"max_new_tokens": 4}}, "text or input_ids"),
        ({"text": "hi", "sampling_params": {"max_new_tokens": -1}}, "max_new_tokens must be >= 0"),
        ({"text": "x" * 2000}, "longer than the model's context length (1024 tokens)"),
        ({"input_ids": [1, 2, 999]}, "input_ids must be"),
        ({"text": "hi", "sampling_params": {"temperature": "hot"}}, "temperature must be float"),
    ],
)
def test_bad_requests_get_400_and_server_keeps_serving(server, body, needle):
    r = requests.post(server.url + "/generate", json=body, timeout=TIMEOUT)
    assert r.status_code == 400
    assert needle in r.json()["error"]["message"]
    assert gen(server, "still alive", n=2)["meta_info"]["completion_tokens"] == 2


def test_malformed_json_is_400(server):
    r = requests.post(server.url + "/generate", data=b'{"text": "unterminated', timeout=TIMEOUT,
                      headers={"Content-Type": "application/json"})
    assert r.status_code == 400 and "malformed JSON" in r.json()["error"]["message"]
    r = requests.post(server.url + "/v1/completions", data=b"[1,", timeout=TIMEOUT)
    assert r.status_code == 400


def test_openai_endpoints(server):
    direct = gen(server, "OpenAI style", n=6)
    r = requests.post(server.url + "/v1/completions", timeout=TIMEOUT, json={
        "model": "x", "prompt": "OpenAI style", "max_tokens": 6, "temperature": 0, "logprobs": 2}).json()
    assert r["choices"][0]["text"] == direct["text"]
    assert r["usage"]["completion_tokens"] == 6 and r["choices"][0]["finish_reason"] == "length"
    assert len(r["choices"][0]["logprobs"]["token_logprobs"]) == 6
    c = requests.post(server.url + "/v1/chat/completions", timeout=TIMEOUT, json={
        "model": "x", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5, "temperature": 0,
        "logprobs": True, "top_logprobs": 1}).json()
    assert c["choices"][0]["message"]["role"] == "assistant"
    assert len(c["choices"][0]["logprobs"]["content"]) == c["usage"]["completion_tokens"] == 5
    models = requests.get(server.url + "/v1/models", timeout=TIMEOUT).json()
    assert models["data"][0]["id"].endswith("reference-tiny")


def test_info_and_health_endpoints(server):
    for path in ("/server_info", "/get_server_info"):
        info = requests.get(server.url + path, timeout=TIMEOUT).json()
        assert info["tp_size"] == 1 and info["page_size"] == 16 and info["disaggregation_mode"] == "null"
        assert info["context_length"] == 1024
        assert info["max_total_num_tokens"] == 8192  # SGLang's key: the full pool's tokens (default pool)
    for path in ("/model_info", "/get_model_info"):
        info = requests.get(server.url + path, timeout=TIMEOUT).json()
        assert info["is_generation"] is True and info["model_path"].endswith("reference-tiny")
    assert requests.get(server.url + "/health", timeout=TIMEOUT).status_code == 200
    assert requests.get(server.url + "/health_generate", timeout=TIMEOUT).status_code == 200


def test_bad_flags_exit_2_with_message(ref_checkpoint, tmp_path):
    import sys

    r = subprocess.run([sys.executable, "-m", "pdctl.reference", "--model-path", str(tmp_path)],
                       check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "no config.json" in r.stderr and "Traceback" not in r.stderr
    r = subprocess.run([sys.executable, "-m", "pdctl.reference", "--model-path", str(ref_checkpoint), "--tp", "3"],
                       check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "not divisible" in r.stderr


def test_zz_sigterm_shuts_down_cleanly(server):
    """Runs last in this module: SIGTERM to the shared server ends it gracefully with exit status 0."""
    assert gen(server, "bye", n=3)["meta_info"]["completion_tokens"] == 3
    server.proc.send_signal(signal.SIGTERM)
    assert wait_exit(server.proc, 20) == 0, server.log_tail()
    log = server.log_path.read_text()
    assert "Application shutdown complete" in log and "Traceback" not in log
