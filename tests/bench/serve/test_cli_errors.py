"""`pdctl bench serve` bad input: a clear message and exit 2, never a traceback (no servers needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.exits import assert_bad_input
from tests.support.net import free_port


def _pdctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pdctl", "bench", "serve", *args], check=False,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--url", "http://127.0.0.1:{port}"], r"--url http://127.0.0.1:\d+ is unreachable"),
        (["--url", "http://127.0.0.1:{port}", "--control-url", "http://127.0.0.1:{port}"], "unreachable"),
        (["--url", "x", "--run-dir", "d"], "either --url URL or --run-dir"),
        (["--url", "x", "--control-url", "y", "--control-topology", "z"], "either --control-url URL or"),
        (["--url", "http://a", "--max-regression", "5%"], "compares against a control"),
        (["--url", "http://a", "--control-url", "http://b", "--max-regression", "five"], "percentage like 5%"),
        (["--url", "http://a", "--control-url", "http://b", "--max-regression", "-3%"], "non-negative"),
        (["--url", "http://a", "--gate-metrics", "ttft"], "unknown metric 'ttft'"),
        (["--url", "http://a", "--concurrency", "1,zero"], "--concurrency: expected comma-separated"),
        (["--url", "http://a", "--isl", "0"], "--isl: every value must be at least 1"),
        (["--url", "http://a", "--isl", "1"], "--isl: prompts need at least 2 tokens"),
        (["--url", "http://a", "--osl", "4,4"], "--osl: values repeat"),
        (["--url", "http://a", "--num-prompts", "0"], "--num-prompts must be at least 1"),
        (["--url", "http://a", "--warmup", "-1"], "--warmup must be 0 or more"),
        (["--url", "http://a", "--request-rate", "0"], r"--request-rate.*0\.0 is not in the range x>0"),
        (["--url", "http://a", "--dataset", "{tmp}/none.jsonl"], "not 'random', 'gsm8k' or an existing"),
        (["--url", "http://a", "--gpus", "0"], "--gpus must be at least 1"),
        (["--url", "ftp://a"], "not an http"),
        (["--run-dir", "{tmp}/nope"], "not a pdctl run directory"),
        (["--topology", "{tmp}/t.yaml"], "--topology goes with --url"),
        (["--url", "http://a", "--api", "grpc"], "Invalid value for '--api'"),
    ],
)
def test_bad_input_exits_2_with_a_message(tmp_path, args: list[str], message: str) -> None:
    port = free_port()  # nothing listens there
    assert_bad_input(_pdctl(*[a.format(port=port, tmp=tmp_path) for a in args]), message)


def test_bench_transfer_is_also_bench_transfer_subcommand() -> None:
    for argv in (["bench", "transfer", "--help"], ["bench-transfer", "--help"]):
        done = subprocess.run([sys.executable, "-m", "pdctl", *argv], capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0 and "Move one request's KV" in done.stdout, done.stderr


def test_bench_transfer_subcommand_is_a_deprecated_alias() -> None:
    """One command, two spellings (issue 20): `bench-transfer` is it; `bench transfer` says so when used."""
    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pdctl", *argv], capture_output=True, text=True, timeout=60,
                              check=False)

    alias = run("bench", "transfer", "no-such.yaml")
    assert alias.returncode == 2 and "no-such.yaml: no such topology file" in alias.stderr
    assert "deprecated. use `pdctl bench-transfer` (the same command)" in " ".join(alias.stderr.split())
    command = run("bench-transfer", "no-such.yaml")
    assert command.returncode == 2 and "deprecated" not in command.stderr
    listing = " ".join(run("bench", "--help").stdout.split())
    assert "transfer Alias of `pdctl bench-transfer`. (DEPRECATED" in listing


def test_without_sglangs_benchmark_it_says_how_to_get_it(tmp_path) -> None:
    """The README tour ran `bench serve` on a checkout without SGLang's side venv: a TypeError traceback (exit
    1) instead of the message and its fix (issue 20)."""
    import http.server
    import threading

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        done = _pdctl("--url", f"http://127.0.0.1:{server.server_address[1]}", "--gpus", "1",
                      "--tool-python", str(tmp_path / "no-python"))
    finally:
        server.shutdown()
        server.server_close()
    assert_bad_input(done, r"SGLang's serving benchmark was not found: .*no-python \(missing\)")
    assert "make sglang-env" in done.stderr
