"""pdctl restart's link proof (pdctl.launch.pair_probe): which pairs a restarted replica forms, and what the
probe says when the decode never answers. The proof on a real deployment (reference engine over NIXL behind
the real router) is tests/launch/test_e2e_faults.py's restart cases; here the pure logic, with a plain HTTP
server standing in for the two servers' /generate."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from pdctl.launch.pair_probe import Pair, pairs_of, peer_advice, probe
from pdctl.render.deployment import render
from pdctl.topology import build_topology
from tests.support.topo_factory import BASE, merge


def specs() -> list[Any]:
    doc = merge(BASE, {"nodes": [{"name": "p0", "host": "10.0.0.11", "gpu": "gb300", "gpus": 4},
                                 {"name": "d0", "host": "10.0.0.12", "gpu": "gb300", "gpus": 4}],
                       "prefill": {"tp": 1, "replicas": 2}, "decode": {"tp": 2, "replicas": 2}})
    return render(build_topology(doc)).workers


def test_a_restarted_replica_is_proved_with_every_peer_the_router_can_pair_it_with() -> None:
    words = [p.words for p in pairs_of(specs(), "decode", 1)]
    assert words == ["prefill-0 -> decode-1", "prefill-1 -> decode-1"]
    (pair,) = [p for p in pairs_of(specs(), "prefill", 1) if p.decode == "decode-0"]
    assert (pair.bootstrap_host, pair.bootstrap_port) == ("10.0.0.11", 8999)  # prefill 1 serves bootstrap + 1
    assert pairs_of(specs(), "router", 0) == []


class _Server:
    """Prefill and decode /generate on one port: DECODE decides the decode's answer (None: never answers)."""

    def __init__(self, decode: tuple[int, dict[str, Any]] | None) -> None:
        self.bodies: list[dict[str, Any]] = []
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.bodies.append(body)
                if self.path.startswith("/decode") and decode is None:
                    outer.release.wait(30)
                    return
                code, doc = (200, {"text": "x"}) if self.path.startswith("/prefill") else decode
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *_: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()
        port = self.httpd.server_address[1]
        self.pair = Pair("prefill-0", f"http://127.0.0.1:{port}/prefill", 8998, "decode-0",
                         f"http://127.0.0.1:{port}/decode")

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.mark.parametrize(("decode", "problem"), [
    ((200, {"text": " three, four"}), None),
    (None, "no answer from the decode within 1 s"),
    ((503, {"error": "KV transfer failed"}), "decode answered HTTP 503"),
])
def test_probe_says_yes_only_when_the_decode_answers(decode: Any, problem: str | None) -> None:
    server = _Server(decode)
    try:
        said = probe(server.pair, timeout=1.0)
    finally:
        server.close()
    assert said == problem if problem is None else problem in str(said)
    rooms = {b["bootstrap_room"] for b in server.bodies}
    assert len(server.bodies) == 2 and len(rooms) == 1  # the same request to both, as the router sends it
    assert {b["bootstrap_port"] for b in server.bodies} == {8998}


def test_peer_advice_names_the_other_side_and_the_report_on_nixl() -> None:
    pair = Pair("prefill-0", "http://a:1", 8998, "decode-1", "http://b:2")
    advice = peer_advice(pair, "decode-1", "nixl")
    assert "`pdctl restart prefill:0 --force`" in advice and "issues/33789" in advice
    assert "`pdctl restart decode:1 --force`" in peer_advice(pair, "prefill-0", "mooncake")
