"""Live metrics for real: `pdctl launch` of the local CPU topology (reference prefill TP2 -> decode TP1 over
NIXL, the real sglang-router), load through the router, then each server's /metrics, `pdctl status --json`
and `pdctl status --watch` (in a pty, Ctrl-C) must move with the requests sent: counts exact, latencies
plausible (positive, p50 <= p99, mean TTFT <= mean E2E)."""

from __future__ import annotations

import json
import os
import pty
import queue
import select
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import requests

from pdctl.metrics.figures import engine_figures
from pdctl.metrics.scrape import fetch
from tests.support.launch_e2e import detached_run, pdctl
from tests.support.launch_samples import local_cpu

pytestmark = [pytest.mark.e2e]
N, M = 6, 5  # requests sent, output tokens each


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path):
    tmp = tmp_path_factory.mktemp("e2e-metrics")
    topo = local_cpu(tmp, ref_checkpoint, name="e2e-metrics")
    with detached_run(tmp, topo) as dep:
        yield dep


def status_json(dep: dict) -> dict:
    done = pdctl("status", "--run-dir", str(dep["run_dir"]), "--json", "-", cwd=dep["tmp"])
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def send(router_url: str, i: int) -> dict:
    """One request through the router; every third one streams (SSE), the others do not."""
    body = {"text": f"request {i}: " + "the quick brown fox " * (i + 1), "stream": i % 3 == 0,
            "sampling_params": {"max_new_tokens": M, "temperature": 0.0, "ignore_eos": True}}
    response = requests.post(router_url + "/generate", json=body, timeout=120, stream=body["stream"])
    assert response.status_code == 200, response.text
    if not body["stream"]:
        return response.json()
    events = [line[len(b"data: "):] for line in response.iter_lines() if line.startswith(b"data: {")]
    return json.loads(events[-1])


def by_name(doc: dict) -> dict[str, dict]:
    return {p["name"]: p["metrics"] for p in doc["processes"]} | {"router": doc["router"]["metrics"]}


def grew(after: dict, before: dict, key: str) -> int:
    return after["totals"][key] - before["totals"][key]


def test_metrics_and_status_json_move_with_the_requests_sent(deployment: dict) -> None:
    router_url = deployment["state"]["router"]["url"]
    workers = {p["name"]: p["url"] for p in deployment["state"]["processes"]}
    before_scrapes = {name: fetch(url + "/metrics") for name, url in workers.items()}
    before = by_name(status_json(deployment))
    with ThreadPoolExecutor(max_workers=3) as pool:
        answers = list(pool.map(lambda i: send(router_url, i), range(N)))
    after = by_name(status_json(deployment))
    prompt_tokens = sum(a["meta_info"]["prompt_tokens"] for a in answers)
    assert all(a["meta_info"]["completion_tokens"] == M for a in answers)

    decode, prefill, router = after["decode-0"], after["prefill-0"], after["router"]
    assert grew(decode, before["decode-0"], "requests") == N and grew(prefill, before["prefill-0"], "requests") == N
    assert grew(decode, before["decode-0"], "prompt_tokens") == prompt_tokens
    assert grew(prefill, before["prefill-0"], "prompt_tokens") == prompt_tokens
    assert grew(decode, before["decode-0"], "generation_tokens") == N * M
    assert grew(prefill, before["prefill-0"], "generation_tokens") == N  # prefill makes the first token only
    for side in ("decode-0", "prefill-0"):
        assert grew(after[side], before[side], "transfers_ok") == N
        assert grew(after[side], before[side], "transfers_failed") == 0 and after[side]["transfer_failures"] == 0
    assert grew(prefill, before["prefill-0"], "kv_transfer_bytes") > 0
    assert router["totals"]["requests"] - before["router"]["totals"]["requests"] == N
    assert router["totals"]["errors"] == before["router"]["totals"]["errors"]

    # latencies (status --json: over the process's life): plausible, ordered, TTFT before E2E
    assert prefill["ttft_ms"] is None and prefill["itl_ms"] is None  # SGLang's rule: decode reports them
    ttft, itl, e2e = decode["ttft_ms"], decode["itl_ms"], decode["e2e_ms"]
    assert ttft["count"] - (before["decode-0"]["ttft_ms"] or {"count": 0})["count"] == N
    assert itl["count"] - (before["decode-0"]["itl_ms"] or {"count": 0})["count"] == N * (M - 1)
    for p in (ttft, itl, e2e, router["e2e_ms"]):
        assert 0 < p["p50"] <= p["p99"] and p["mean"] > 0
    assert ttft["mean"] <= e2e["mean"]

    # a request the workers refuse (longer than the context) is a routed request that failed: counted
    refused = requests.post(router_url + "/generate", timeout=120,
                            json={"text": "x" * 5000, "sampling_params": {"max_new_tokens": 2}})
    assert refused.status_code == 400, refused.text
    assert by_name(status_json(deployment))["router"]["totals"]["errors"] == router["totals"]["errors"] + 1

    # the same counts straight from /metrics, over this interval (the reader status --watch uses)
    for name, url in workers.items():
        figures = engine_figures(fetch(url + "/metrics"), before_scrapes[name])
        assert figures["window"] == "interval" and figures["requests_per_s"] > 0
        expected_ttft = N if name == "decode-0" else None
        assert (figures["ttft_ms"] or {}).get("count") == expected_ttft


def _reader(stream, lines: queue.Queue) -> None:
    for line in stream:
        lines.put(line)


def test_status_watch_refreshes_until_ctrl_c(deployment: dict) -> None:
    """--watch in a terminal (stderr is a pty: the live table) with JSON lines on stdout, then SIGINT."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "pdctl", "status", "--watch", "--interval", "0.5", "--run-dir",
         str(deployment["run_dir"]), "--json", "-"],
        cwd=deployment["tmp"], stdout=subprocess.PIPE, stderr=slave, text=True,
        env={**os.environ, "COLUMNS": "200", "LINES": "40", "TERM": "xterm"},
    )
    os.close(slave)
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(proc.stdout, lines), daemon=True).start()
    screen = b""
    try:
        docs = [json.loads(lines.get(timeout=60))]
        send(deployment["state"]["router"]["url"], 1)  # traffic while watching
        deadline = time.monotonic() + 60
        while (len(docs) < 3 or sum(_decode_requests(d) for d in docs[1:]) < 0.5) and time.monotonic() < deadline:
            docs.append(json.loads(lines.get(timeout=30)))
        while select.select([master], [], [], 0.2)[0]:
            screen += os.read(master, 65536)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0  # Ctrl-C is how a watch ends: exit 0, as `pdctl logs --follow`
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        os.close(master)
    assert docs[0]["processes"][0]["metrics"]["window"] == "lifetime"
    later = docs[1:]
    assert all(d["processes"][0]["metrics"]["window"] == "interval" for d in later)
    assert all(0 < d["processes"][0]["metrics"]["interval_s"] for d in later)
    assert sum(_decode_requests(d) for d in later) >= 0.5, "the request sent while watching never showed up"
    text = screen.decode("utf-8", "replace")
    assert "prefill-0" in text and "decode-0" in text and "router" in text and "Ctrl-C ends" in text


def _decode_requests(doc: dict) -> float:
    decode = next(p["metrics"] for p in doc["processes"] if p["name"] == "decode-0")
    return (decode["requests_per_s"] or 0) * (decode["interval_s"] or 0)
