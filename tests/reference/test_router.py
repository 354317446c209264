"""The real sglang-router (regular mode) accepts the reference server as a worker and routes to it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import requests

from tests.support.net import free_port, wait_http_ok
from tests.support.servers import kill_group, start_reference_server

pytestmark = pytest.mark.e2e


def _router_ready(url: str, proc: subprocess.Popen, timeout: float = 60.0) -> None:
    """Wait until the router answers /generate through a healthy worker (or fail with its log)."""
    ping = {"text": "ping", "sampling_params": {"max_new_tokens": 1, "temperature": 0}}
    wait_http_ok(url + "/generate", timeout=timeout, proc=proc, post_json=ping, request_timeout=10, interval=0.3)


def test_router_routes_generate_to_reference_server(ref_checkpoint, tmp_path):
    with start_reference_server(ref_checkpoint) as srv:
        port = free_port()
        log = open(tmp_path / "router.log", "wb")  # noqa: SIM115 - closed in the finally below
        cmd = [sys.executable, "-m", "sglang_router.launch_router", "--worker-urls", srv.url, "--host", "127.0.0.1",
               "--port", str(port), "--prometheus-port", str(free_port()), "--log-level", "warn"]
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                env={**os.environ, "RUST_LOG": "warn"})
        try:
            url = f"http://127.0.0.1:{port}"
            try:
                _router_ready(url, proc)
            except (RuntimeError, TimeoutError) as exc:
                raise AssertionError(f"{exc}\n{(tmp_path / 'router.log').read_text(errors='replace')[-3000:]}") from exc
            body = {"text": "Routed through sglang-router", "sampling_params": {"max_new_tokens": 10, "temperature": 0},
                    "return_logprob": True}
            via_router = requests.post(url + "/generate", json=body, timeout=60).json()
            direct = requests.post(srv.url + "/generate", json=body, timeout=60).json()
            assert via_router["output_ids"] == direct["output_ids"]
            assert via_router["text"] == direct["text"]
            chat = requests.post(url + "/v1/chat/completions", timeout=60, json={
                "model": "reference-tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3,
                "temperature": 0})
            assert chat.status_code == 200, chat.text
            assert chat.json()["usage"]["completion_tokens"] == 3
        finally:
            kill_group(proc)
            log.close()
