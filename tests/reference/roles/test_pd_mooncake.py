"""PD through the REAL sglang-router over Mooncake (TCP, P2PHANDSHAKE): TP2 -> TP1, TP1 -> TP2 and TP1 -> TP4
parity, and a prefill killed mid-request gives the client an error within the transfer timeout (never a hang).

The kill test ends the module's deployment, so it runs last in this file.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
import requests

from tests.support.net import wait_for
from tests.support.pd import start_pd, start_shared_prefill
from tests.support.pd_answers import PROMPTS, assert_same, body, generate

pytestmark = pytest.mark.e2e
TIMEOUT = 10.0  # --transfer-timeout of both servers


@pytest.fixture(scope="module")
def dep(ref_checkpoint, tmp_path_factory):
    args = ["--transfer-timeout", str(TIMEOUT)]
    with start_pd(
        ref_checkpoint,
        prefill_tp=2,
        decode_tp=1,
        backend="mooncake",
        prefill_args=args,
        decode_args=args,
        log_dir=tmp_path_factory.mktemp("mooncake"),
    ) as pd:
        yield pd


def test_tp2_to_tp1_matches_colocated(dep, colocated_answers):
    for prompt in PROMPTS:
        assert_same(generate(dep.router_url, prompt), colocated_answers[prompt], f"mooncake TP2->TP1 {prompt[:20]!r}")


@pytest.fixture(scope="module")
def p1(ref_checkpoint, tmp_path_factory):
    """Prefill TP1 over Mooncake serving decodes TP2 and TP4."""
    with start_shared_prefill(
        ref_checkpoint,
        1,
        {"d2": (2, []), "d4": (4, [])},
        {"d2", "d4"},
        tmp_path_factory.mktemp("mooncake-p1"),
        backend="mooncake",
    ) as routers:
        yield routers


@pytest.mark.parametrize("decode", ["d2", "d4"])
def test_tp1_to_wider_decode_matches_colocated(p1, colocated_answers, decode):
    for prompt in PROMPTS:
        assert_same(generate(p1[decode], prompt), colocated_answers[prompt], f"mooncake TP1->{decode} {prompt[:20]!r}")


def test_killing_prefill_mid_request_is_an_error_not_a_hang(dep):
    # Freeze the prefill, send a request, and kill the prefill once decode holds the request (it logs that it
    # asks the prefill for the room's KV): the request is then certainly in flight on both sides.
    asked = dep.decode.log_path.read_text(errors="replace").count("asking prefill")
    os.killpg(dep.prefill.proc.pid, signal.SIGSTOP)
    result: dict = {}

    def call() -> None:
        try:
            r = requests.post(dep.router_url + "/generate", json=body(PROMPTS[2]), timeout=12 * TIMEOUT)
            result["status"], result["text"] = r.status_code, r.text
        except requests.RequestException as exc:
            result["status"], result["text"] = None, str(exc)

    thread = threading.Thread(target=call)
    thread.start()
    wait_for(lambda: dep.decode.log_path.read_text(errors="replace").count("asking prefill") > asked,
             timeout=6 * TIMEOUT, what="decode to take the request", detail=dep.log_tails)
    os.killpg(dep.prefill.proc.pid, signal.SIGKILL)
    thread.join(timeout=12 * TIMEOUT)
    assert not thread.is_alive(), "the client is still waiting: the request hangs"
    assert result["status"] != 200, result
    # The decode server reports the dead prefill and keeps serving.
    wait_for(lambda: "unreachable" in dep.decode.log_path.read_text(errors="replace"), timeout=6 * TIMEOUT,
             what="decode to report the dead prefill", detail=dep.log_tails)
    assert requests.get(dep.decode_url + "/health", timeout=10).status_code == 200
