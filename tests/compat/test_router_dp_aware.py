"""The router fact behind check-compat's dp-routing rule, held against the REAL sglang-router (0.3.2).

With --dp-aware in PD mode the router registers each DP rank of a worker as `http://host:port@rank` and sends
requests to that string, which an HTTP client reads as user info `host:port` and host `rank`: no request
reaches a worker. Without it the router sends both halves of a request, with one random bootstrap_room, to
the prefill and the decode worker (SGLang's DP controllers dispatch on that room). The workers here are
recorders that answer what the router asks at registration (/health, /server_info with dp_size 2, ...) and
keep every request they receive; the router is the part under test. If a router release fixes --dp-aware,
this test fails and the rule (pdctl/compat/dp.py) must learn the release.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import requests

from pdctl.sglang import incidents
from tests.support.net import free_port, wait_for, wait_http_ok
from tests.support.pd import router_command
from tests.support.servers import kill_group, log_tail

pytestmark = pytest.mark.e2e


class Recorder(ThreadingHTTPServer):
    """A worker stand-in: answers registration (with DP_SIZE in /server_info), records the requests it gets."""

    def __init__(self, role: str, dp_size: int = 2) -> None:
        self.role, self.dp_size, self.posts = role, dp_size, []
        super().__init__(("127.0.0.1", 0), _Handler)
        threading.Thread(target=self.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class _Handler(BaseHTTPRequestHandler):
    server: Recorder

    def log_message(self, *args: object) -> None:
        pass

    def _send(self, doc: dict) -> None:
        body = json.dumps(doc).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        if "server_info" in self.path:
            self._send({"dp_size": self.server.dp_size, "tp_size": self.server.dp_size, "load_balance_method": "follow_bootstrap_room",
                        "disaggregation_mode": self.server.role, "model_path": "m", "served_model_name": "m"})
        elif self.path.startswith("/v1/models"):
            self._send({"object": "list", "data": [{"id": "m", "object": "model"}]})
        else:
            self._send({"model_path": "m", "is_generation": True})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        self.server.posts.append((self.path, body))
        self._send({"text": "x", "meta_info": {"id": "1", "finish_reason": {"type": "length", "length": 1},
                                               "prompt_tokens": 1, "completion_tokens": 1}})


@contextmanager
def router(prefill: Recorder, decode: Recorder, tmp_path: Path, *extra: str) -> Iterator[str]:
    port, prom = free_port(), free_port()
    log = tmp_path / f"router-{port}.log"
    argv = router_command(prefill.url, 9999, decode.url, port, prom) + ["--health-check-interval-secs", "1", *extra]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_http_ok(f"http://127.0.0.1:{port}/health", timeout=120, proc=proc)
        yield f"http://127.0.0.1:{port}"
    finally:
        kill_group(proc)
        print(log_tail(log, 20))


def generate(url: str) -> requests.Response:
    return requests.post(url + "/generate", json={"text": "hi", "sampling_params": {"max_new_tokens": 1}}, timeout=60)


def test_router_sends_one_bootstrap_room_to_both_workers(tmp_path: Path) -> None:
    prefill, decode = Recorder("prefill"), Recorder("decode")
    try:
        with router(prefill, decode, tmp_path) as url:
            wait_for(lambda: generate(url).status_code == 200, timeout=120, what="the router to route a request")
        rooms = {r: [b["bootstrap_room"] for p, b in w.posts if p == "/generate"] for r, w in
                 (("prefill", prefill), ("decode", decode))}
        assert rooms["prefill"] and rooms["prefill"][-1] in rooms["decode"]
        assert all("data_parallel_rank" not in b for w in (prefill, decode) for _, b in w.posts)
    finally:
        for worker in (prefill, decode):
            worker.shutdown()
            worker.server_close()


@pytest.mark.parametrize("dp_size", [1, 2])
def test_router_dp_aware_in_pd_mode_reaches_no_worker(tmp_path: Path, dp_size: int) -> None:
    """Whatever the workers' DP size: with dp_size 1 the router registers `http://host:port@0`."""
    assert incidents.ROUTER_TESTED == "0.3.2"
    from importlib.metadata import version

    assert version("sglang-router") == incidents.ROUTER_TESTED
    prefill, decode = Recorder("prefill", dp_size), Recorder("decode", dp_size)
    answers: list[requests.Response] = []

    def routed() -> bool:  # until the router picks a pair (its workers are healthy), not "no available workers"
        answers.append(generate(url))
        return "No available" not in answers[-1].text

    try:
        with router(prefill, decode, tmp_path, "--dp-aware") as url:
            wait_for(routed, timeout=120, what="the router to pick a prefill/decode pair")
            for _ in range(4):
                answers.append(generate(url))
        assert all(a.status_code != 200 for a in answers[-5:]), [a.text for a in answers[-5:]]
        assert prefill.posts == [] and decode.posts == []
    finally:
        for worker in (prefill, decode):
            worker.shutdown()
            worker.server_close()
