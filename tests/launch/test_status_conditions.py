"""The status rows' states from what the router says (pure logic; the live cases are in
tests/launch/test_e2e_faults.py): a worker that answers its health check while the router keeps its circuit
open, or still marks it unhealthy, is `recovering`, and the router row says so and is not healthy."""

from __future__ import annotations

from pdctl.launch.status import mark_recovering, open_circuits


def _rows() -> tuple[list[dict], dict]:
    processes = [
        {"name": "prefill-0", "url": "http://127.0.0.1:1000", "state": "healthy", "healthy": True, "detail": "HTTP 200"},
        {"name": "decode-0", "url": "http://127.0.0.1:1100/", "state": "healthy", "healthy": True, "detail": "HTTP 200"},
    ]
    router = {"healthy": True, "detail": "2/2 workers serving",
              "workers": [{"url": "http://127.0.0.1:1000", "is_healthy": True},
                          {"url": "http://127.0.0.1:1100", "is_healthy": True}]}
    return processes, router


def test_an_open_circuit_makes_a_serving_worker_recovering() -> None:
    processes, router = _rows()
    mark_recovering(processes, router, {"http://127.0.0.1:1100": "open"})
    assert processes[1]["state"] == "recovering" and processes[1]["healthy"] is False
    assert processes[1]["detail"] == "recovering: answers its health check; the router's circuit open"
    assert processes[0]["state"] == "healthy"
    assert router["healthy"] is False and router["detail"].endswith("; recovering: decode-0")


def test_a_worker_the_router_still_calls_unhealthy_is_recovering() -> None:
    processes, router = _rows()
    router["workers"][0]["is_healthy"] = False
    mark_recovering(processes, router, {})
    assert processes[0]["state"] == "recovering" and "marked unhealthy" in processes[0]["detail"]


def test_nothing_open_changes_nothing() -> None:
    processes, router = _rows()
    mark_recovering(processes, router, {})
    assert [p["state"] for p in processes] == ["healthy", "healthy"] and router["healthy"] is True


def test_circuits_are_read_from_the_routers_metrics(tmp_path) -> None:
    """smg_worker_cb_state as sglang-router 0.3.2 serves it (a real scrape kept in tests/data), over real HTTP."""
    import http.server
    import threading

    from tests.support.paths import DATA

    text = (DATA / "router-0.3.2-metrics.txt").read_text()
    opened = text.replace('smg_worker_cb_state{worker="http://127.0.0.1:43731"} 0',
                          'smg_worker_cb_state{worker="http://127.0.0.1:43731"} 1')
    assert opened != text

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = opened.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_args) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
        assert open_circuits(url) == {"http://127.0.0.1:43731": "open"}
    finally:
        server.shutdown()
        server.server_close()
    assert open_circuits(None) == {} and open_circuits("http://127.0.0.1:9/metrics") == {}
