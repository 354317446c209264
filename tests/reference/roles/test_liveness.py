"""A slow PD peer is not a dead one: a prefill that stops answering for a while (SIGSTOP: the extreme of a
loaded machine) delays its requests instead of failing them; a prefill that is gone (SIGKILL) fails them fast."""

from __future__ import annotations

import os
import signal
import socket
import threading

import pytest
import requests

from pdctl.reference.roles.liveness import DEAD, SLOW, PeerHealth, RoomClock, classify
from tests.support.net import wait_for
from tests.support.pd import start_pd
from tests.support.pd_answers import PROMPTS, body


def test_timeouts_are_slow_and_refusals_are_dead():
    with socket.socket() as s:  # a port nobody listens on: connection refused
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(requests.RequestException) as refused:
        requests.get(f"http://127.0.0.1:{port}/health", timeout=5)
    assert classify(refused.value) == DEAD
    with socket.socket() as srv:  # a listener that never answers: the read times out
        srv.bind(("127.0.0.1", 0))
        srv.listen(1)
        with pytest.raises(requests.RequestException) as slow:
            requests.get(f"http://127.0.0.1:{srv.getsockname()[1]}/health", timeout=0.2)
    assert classify(slow.value) == SLOW
    health = PeerHealth()
    assert not health.record(SLOW) and not health.record(SLOW) and not health.record(DEAD)
    assert not health.record("ok") and not health.record(DEAD) and health.record(DEAD)
    clock = RoomClock()
    assert clock.deadline(7, 100.0, 30.0) == 130.0
    clock.touch([7], now=120.0)
    assert clock.deadline(7, 100.0, 30.0) == 150.0 and clock.deadline(8, 100.0, 30.0) == 130.0


@pytest.mark.e2e
def test_a_stopped_prefill_delays_requests_and_a_dead_one_fails_them_fast(ref_checkpoint):
    """The router's dual dispatch done by hand (so that the prefill provably has the request when it freezes):
    decode waits for room R, the prefill is stopped (SIGSTOP), gets its half of R, stays frozen while decode
    probes it in vain, then resumes: both halves succeed. Then the prefill is killed: decode fails at once."""
    with start_pd(ref_checkpoint, prefill_tp=1, decode_tp=1, backend="nixl") as pd:
        prefill = pd.prefill.proc
        room = {"bootstrap_host": "127.0.0.1", "bootstrap_port": pd.bootstrap_port, "bootstrap_room": 4711}
        req = body(PROMPTS[0], max_new=4) | room
        results: dict = {}

        def send(name: str, url: str) -> threading.Thread:
            def run() -> None:
                try:
                    results[name] = requests.post(url + "/generate", json=req, timeout=180)
                except requests.RequestException as exc:
                    results[name] = exc

            t = threading.Thread(target=run)
            t.start()
            return t

        def transferring() -> int:
            info = requests.get(pd.decode_url + "/server_info", timeout=30).json()
            return info["internal_states"][0]["num_transferring_reqs"]

        threads = [send("decode", pd.decode_url)]
        wait_for(lambda: transferring() == 1, timeout=60, what="decode to wait for room 4711", detail=pd.log_tails)
        os.kill(prefill.pid, signal.SIGSTOP)
        try:
            threads.append(send("prefill", pd.prefill_url))  # queued in the frozen prefill's socket
            # decode keeps probing the frozen prefill: wait until it saw it unresponsive twice (the old
            # watchdog declared it dead after two missed probes), or until the decode request ended anyway
            wait_for(lambda: not threads[0].is_alive() or pd.decode.log_path.read_text().count("slow to answer") >= 2,
                     timeout=120, what="decode to notice the frozen prefill", detail=pd.log_tails)
        finally:
            os.kill(prefill.pid, signal.SIGCONT)
        for t in threads:
            t.join(180)
        for name in ("decode", "prefill"):
            r = results[name]
            assert isinstance(r, requests.Response) and r.status_code == 200, (name, getattr(r, "text", r),
                                                                                pd.log_tails())
        assert results["decode"].json()["meta_info"]["completion_tokens"] == 4
        prefill_log = pd.prefill.log_path.read_text()
        assert "BrokenPipeError" not in prefill_log and "Traceback" not in prefill_log, prefill_log[-3000:]

        prefill.send_signal(signal.SIGKILL)
        prefill.wait(30)
        r = requests.post(pd.decode_url + "/generate", timeout=120, json=body(PROMPTS[1], max_new=4) | room | {
            "bootstrap_room": 777})
        assert r.status_code != 200
        assert "refuses connections" in r.text or "connection refused" in r.text, r.text
        assert "timed out" not in r.text  # told at once, not after --transfer-timeout
