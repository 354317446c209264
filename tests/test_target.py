"""The one resolver of a deployment target (pdctl/target.py), shared by eval, parity and bench serve: what a run
dir or a URL resolves to (the servers to flush for cold and warm sends, the run it is), and a target that does
not answer is bad input before any work starts. The servers are real HTTP servers on this machine."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from pdctl.errors import UserError
from pdctl.runs import STATE_FILE
from pdctl.target import discover_workers, resolve, target_from_state, target_from_url
from tests.support.net import free_port


def test_targets_know_what_to_flush_for_cold_and_warm() -> None:
    state = {"processes": [{"role": "prefill", "url": "http://p:1/"}, {"role": "decode", "url": "http://d:2"}],
             "router": {"url": "http://r:3"}}
    run = target_from_state(state)
    assert (run.url, run.cold_flush_urls, run.flush_decode, run.info_url) == (
        "http://r:3", ["http://p:1", "http://d:2"], ["http://d:2"], "http://p:1")
    bare = target_from_url("http://r:3/")
    assert (bare.cold_flush_urls, bare.flush_decode) == (["http://r:3"], [])  # warm flushes nothing
    named = target_from_url("http://r:3", decode_urls=("http://d:2",))
    assert (named.cold_flush_urls, named.flush_decode) == (["http://r:3", "http://d:2"], ["http://d:2"])
    colocated = target_from_state({"processes": [{"role": "colocated", "url": "http://c:4"}]})
    assert (colocated.url, colocated.flush_decode) == ("http://c:4", [])
    with pytest.raises(UserError):
        target_from_state({"processes": []})


def test_pd_router_workers_are_discovered() -> None:
    doc = {"workers": [  # the shape sglang-router's GET /workers answers (trimmed)
        {"url": "http://127.0.0.1:34781", "worker_type": "decode", "is_healthy": True},
        {"url": "http://127.0.0.1:60541/", "worker_type": "prefill", "bootstrap_port": 44273},
        {"url": "http://127.0.0.1:1", "worker_type": "regular"}], "total": 3}
    found = discover_workers(doc)
    assert (found.prefill, found.decode) == (["http://127.0.0.1:60541"], ["http://127.0.0.1:34781"])
    assert found.regular == ["http://127.0.0.1:1"]  # a regular router's plain server (tests/parity/test_splits.py)
    assert discover_workers(None) == discover_workers({})


@pytest.fixture
def router() -> Iterator[str]:
    """An HTTP server answering /health and a PD router's GET /workers."""
    workers = {"workers": [{"url": "http://127.0.0.1:7001", "worker_type": "prefill"},
                           {"url": "http://127.0.0.1:7002", "worker_type": "decode"}]}

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(workers if self.path == "/workers" else {}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            return None

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def test_a_url_resolves_with_the_servers_its_router_lists(router: str) -> None:
    target = resolve(router + "/", None, what="candidate")
    assert (target.url, target.prefill_urls, target.flush_decode, target.run_dir) == (
        router, ["http://127.0.0.1:7001"], ["http://127.0.0.1:7002"], None)
    named = resolve(router, None, decode_urls=("http://d:2",))  # servers the user names win over discovery
    assert named.flush_decode == ["http://d:2"] and named.prefill_urls == []


def test_a_run_dir_resolves_to_its_router_and_state(tmp_path: Path, router: str) -> None:
    state = {"processes": [{"name": "prefill-0", "role": "prefill", "replica": 0, "node": "n", "url": "http://p:1"}],
             "router": {"url": router}}
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    target = resolve(None, tmp_path)
    assert (target.url, target.run_dir, target.state["router"]["url"]) == (router, tmp_path, router)


def test_a_target_that_does_not_answer_is_bad_input(tmp_path: Path) -> None:
    nobody = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(UserError, match=f"candidate {nobody} is unreachable"):
        resolve(nobody, None, what="candidate")
    (tmp_path / STATE_FILE).write_text(json.dumps({"processes": [], "router": {"url": nobody}}))
    with pytest.raises(UserError, match=f"the router of run {tmp_path} {nobody} is unreachable"):
        resolve(None, tmp_path)
    with pytest.raises(UserError, match="is not an http"):
        resolve("127.0.0.1:8000", None, what="--url")
    with pytest.raises(UserError, match="not a pdctl run directory"):
        resolve(None, tmp_path / "nowhere")
