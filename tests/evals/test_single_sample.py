"""`n > 1` in PD (dynamo#14098: parallel samples that share one bootstrap room hang): pdctl's own traffic —
eval, parity, restart's link probe — sends one prompt with one sample per request, which every SGLang release
serves in PD (io_struct.py expands a single bootstrap_room to room + i per sample from 0.5.5 to 0.5.23, read
off the wheels; only a batch with a list of rooms repeats them per sample). This pins that none of them starts
sending parallel samples or batches."""

from __future__ import annotations

from typing import Any

import pytest

from pdctl.evals.client import RequestConfig, build_body
from pdctl.launch.pair_probe import Pair, probe
from pdctl.parity.client import generate_body
from pdctl.parity.prompts import Prompt


def single(body: dict[str, Any]) -> bool:
    params = body.get("sampling_params", body)
    prompt = body.get("text", body.get("prompt", body.get("input_ids", body.get("messages"))))
    return params.get("n", 1) == 1 and "n" not in body and not (isinstance(prompt, list) and prompt
                                                                 and isinstance(prompt[0], (list, str)))


@pytest.mark.parametrize("api", ["generate", "completion", "chat"])
def test_eval_requests_are_one_sample(api: str) -> None:
    assert single(build_body(RequestConfig(url="http://x", api=api, stop=("Q:",)), "What is 2+2?"))


def test_parity_requests_are_one_sample() -> None:
    assert single(generate_body(Prompt(name="t", text="hello"), max_new_tokens=4))
    assert single(generate_body(Prompt(name="i", input_ids=[1, 2, 3]), max_new_tokens=4))


def test_the_restart_probe_is_one_sample(monkeypatch: pytest.MonkeyPatch) -> None:
    sent: list[dict[str, Any]] = []

    class Answer:
        status_code = 200
        text = ""

        @staticmethod
        def json() -> dict[str, Any]:
            return {"text": "ok"}

    def post(url: str, json: dict[str, Any], timeout: float) -> Answer:
        sent.append(json)
        return Answer()

    monkeypatch.setattr("pdctl.launch.pair_probe.requests.post", post)
    assert probe(Pair("prefill-0", "http://p:1", 8998, "decode-0", "http://d:2"), timeout=5) is None
    assert len(sent) == 2 and all(single(b) for b in sent)
