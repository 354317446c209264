"""End to end: `pdctl bench serve` runs SGLang's real serving benchmark against the local CPU PD deployment
(configs/local-cpu.yaml: prefill TP2 -> decode TP1 over NIXL behind the real sglang-router, launched with
`pdctl launch`), with a colocated control launched for the run (configs/local-cpu-reference.yaml), and the
regression gate against a deliberately slowed candidate (a real proxy adding latency in front of the same
deployment). Lengths and request counts are small: the numbers must add up exactly, not be fast."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
import requests

from pdctl.bench.serve.sanity import RULES
from tests.support.chromium import Chromium
from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import local_cpu, local_cpu_reference
from tests.support.slow_proxy import SlowProxy

pytestmark = pytest.mark.e2e

# The sweep comes from the launched topology's bench: section (2 concurrencies x 2 input lengths), and a
# prediction (as `pdctl suggest --out` writes one) of one of its points, which the run compares with.
PREDICTED = {"source": "test prediction", "concurrency": 2, "isl": 40, "osl": 6, "ttft_ms": 50.0, "itl_ms": 20.0,
             "output_tok_s": 100.0, "targets": {"ttft_ms": 600000.0, "itl_ms": 600000.0}}
BENCH = {"serve": {"concurrency": [1, 2], "isl": [16, 40], "osl": [6], "num_prompts": 4, "warmup": 1, "seed": 3},
         "predicted": PREDICTED}
PD_GPUS = 3  # prefill TP2 + decode TP1


@pytest.fixture(scope="module")
def pd_run(tmp_path_factory: pytest.TempPathFactory, ref_checkpoint: Path, sglang_python: str):
    tmp = tmp_path_factory.mktemp("bench-serve")
    topo = local_cpu(tmp, ref_checkpoint, name="bench-serve-pd", bench=BENCH)
    run_dir = tmp / "run"
    try:
        done = pdctl("launch", str(topo), "--run-dir", str(run_dir), "--detach", "--timeout", "180", "--json", "-",
                     cwd=tmp, timeout=240)
        assert done.returncode == 0, done.stderr
        yield {"tmp": tmp, "run_dir": run_dir, "router": json.loads(done.stdout)["router"]["url"],
               "checkpoint": ref_checkpoint, "python": sglang_python}
    finally:
        if (run_dir / "state.json").exists():
            from pdctl.launch.shutdown import teardown

            teardown(run_dir, grace_s=5)


def _bench(run: dict, *args: str, timeout: float = 900) -> tuple[object, dict]:
    out = run["tmp"] / f"bench-{abs(hash(args))}.json"
    done = pdctl("bench", "serve", "--tool-python", run["python"], *args, "--json", str(out), cwd=run["tmp"],
                 timeout=timeout)
    doc = json.loads(out.read_text()) if out.exists() else {}
    return done, doc


def _check_side(p: dict, concurrency: int, isl: int, osl: int) -> None:
    """One deployment's numbers at one point are what was sent, and internally consistent."""
    assert (p["requests"], p["completed"], p["errors"]) == (4, 4, 0), p
    assert p["input_tokens"] == 4 * isl and p["output_tokens"] == 4 * osl, p  # exact: ids in, server counts out
    assert p["problems"] == [] and p["error_samples"] == []
    # the sanity checks ran and agree: a warm-up first, the concurrency reached, the servers counted the same
    assert p["client"]["warmup"]["sent"] >= 1 and p["client"]["peak_in_flight"] == concurrency, p["client"]
    warm = p["client"]["warmup"]
    assert p["server"]["checked"] is True, p["server"]
    assert p["server"]["delta"] == {"requests": 4 + warm["ok"], "prompt_tokens": 4 * isl + warm["prompt_tokens"],
                                    "generation_tokens": 4 * osl + warm["output_tokens"]}, p["server"]
    for key in ("ttft_ms", "itl_ms", "e2e_ms", "tpot_ms"):
        q = p[key]
        assert 0 < q["p50"] <= q["p90"] <= q["p99"], (key, q)
    assert p["ttft_ms"]["p50"] <= p["e2e_ms"]["p50"] and p["ttft_ms"]["p99"] <= p["e2e_ms"]["p99"]
    assert p["request_throughput"] > 0 and p["output_tok_s"] > 0
    # throughput is the tokens served over the tool's measured duration
    assert p["output_tok_s"] == pytest.approx(p["output_tokens"] / p["duration_s"], rel=1e-6)
    assert p["request_throughput"] == pytest.approx(p["completed"] / p["duration_s"], rel=1e-6)


def test_sweep_against_a_launched_colocated_control(pd_run: dict, chromium: Chromium) -> None:
    control = local_cpu_reference(pd_run["tmp"], pd_run["checkpoint"], name="bench-serve-ref")
    report = pd_run["tmp"] / "report.html"
    done, doc = _bench(pd_run, "--run-dir", str(pd_run["run_dir"]), "--control-topology", str(control),
                       "--launch-timeout", "180", "--report", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    assert doc["ok"] is True and doc["tool"].startswith("sglang.bench_serving 0.5.23")
    assert doc["candidate"]["gpus"] == PD_GPUS and doc["control"]["gpus"] == 1
    lock = json.loads((pd_run["run_dir"] / "lock.json").read_text())  # the result cites the launched run's lock
    assert doc["candidate"]["lock"]["topology_sha256"] == lock["topology"]["sha256"] and lock["preflight"] == "passed"
    assert [(p["concurrency"], p["isl"], p["osl"]) for p in doc["points"]] == [
        (1, 16, 6), (1, 40, 6), (2, 16, 6), (2, 40, 6)]
    for p in doc["points"]:
        _check_side(p, p["concurrency"], p["isl"], p["osl"])
        _check_side(p["control"], p["concurrency"], p["isl"], p["osl"])
        assert p["output_tok_s_per_gpu"] == pytest.approx(p["output_tok_s"] / PD_GPUS)
        assert p["ratio"]["ttft_ms"]["p50"] == pytest.approx(p["ttft_ms"]["p50"] / p["control"]["ttft_ms"]["p50"])
        assert p["ratio"]["output_tok_s"] == pytest.approx(p["output_tok_s"] / p["control"]["output_tok_s"])
        assert p["ratio"]["output_tok_s_per_gpu"] == pytest.approx(p["ratio"]["output_tok_s"] / PD_GPUS)
    assert doc["gate"]["max_regression"] is None and doc["gate"]["failures"] == []
    # the topology's prediction next to the measurement of its point (2, 40, 6)
    point = next(p for p in doc["points"] if (p["concurrency"], p["isl"], p["osl"]) == (2, 40, 6))
    prediction = doc["prediction"]
    assert prediction["point"] == {"concurrency": 2, "isl": 40, "osl": 6}
    assert prediction["measured"] == {"ttft_ms": point["ttft_ms"]["p50"], "itl_ms": point["itl_ms"]["p50"],
                                      "output_tok_s": point["output_tok_s"]}
    assert prediction["ratio"]["output_tok_s"] == pytest.approx(point["output_tok_s"] / 100.0)
    assert prediction["targets_met"] == {"ttft_ms": True, "itl_ms": True}
    assert "predicted vs measured" in done.stdout
    # the launched control is gone again, and the table was shown
    with pytest.raises(requests.RequestException):
        requests.get(doc["control"]["url"] + "/health", timeout=2)
    assert "ratio" in done.stdout and "BENCH OK" in done.stdout
    dom = chromium.dump_dom(report)
    assert 'id="verdict">PASS<' in dom and "<img" in dom and dom.count("<tr") == 1 + 3 * 4
    chromium.assert_not_blank(chromium.screenshot(report, pd_run["tmp"] / "report.png"))


def test_gate_fails_a_slowed_candidate(pd_run: dict) -> None:
    # real text this time: the shipped GSM8K questions, tokenized by the tool and cut to exactly 16 tokens
    with SlowProxy(pd_run["router"], delay_s=0.4) as slow:
        done, doc = _bench(pd_run, "--url", slow.url, "--control-url", pd_run["router"], "--concurrency", "1",
                           "--isl", "16", "--osl", "4", "--num-prompts", "3", "--warmup", "1", "--dataset", "gsm8k",
                           "--max-regression", "5%", "--gate-metrics", "ttft_ms.p50,e2e_ms.p50")
        assert slow.requests >= 3
    assert done.returncode == 1, done.stdout + done.stderr
    assert doc["ok"] is False and doc["errors"] == 0 and doc["problems"] == []
    (point,) = doc["points"]
    for side in (point, point["control"]):
        assert (side["completed"], side["input_tokens"], side["output_tokens"]) == (3, 3 * 16, 3 * 4), side
    assert point["ttft_ms"]["p50"] >= 400 > point["control"]["ttft_ms"]["p50"]  # the proxy's delay is in there
    metrics = {f["metric"] for f in doc["gate"]["failures"]}
    assert metrics == {"ttft_ms.p50", "e2e_ms.p50"}, doc["gate"]
    assert doc["prediction"] is None  # --url without --topology: no prediction to compare with
    assert all(f["regression_pct"] > 5 for f in doc["gate"]["failures"])
    assert "gate:" in done.stdout and "BENCH FAILED" in done.stdout


def test_failed_requests_fail_the_run(pd_run: dict) -> None:
    # a prompt longer than the engine's context (4096): every request is refused by the server; the run must say no
    done, doc = _bench(pd_run, "--url", pd_run["router"], "--concurrency", "1", "--isl", "5000", "--osl", "4",
                       "--num-prompts", "2", "--warmup", "0")
    assert done.returncode == 1, done.stdout + done.stderr
    assert doc["ok"] is False and doc["points"][0]["errors"] == 2 and doc["points"][0]["completed"] == 0
    assert doc["points"][0]["error_samples"], doc["points"][0]


def _no_text(body: bytes) -> bytes:
    """A front that passes the engine's answer on without the generated text (its stream's events, emptied):
    the client receives no token. SGLang's tool then reports the requested length as generated."""
    out = []
    for line in body.split(b"\n"):
        if line.startswith(b"data: {"):
            event = json.loads(line[len(b"data: "):])
            event["text"], event["output_ids"] = "", []
            line = b"data: " + json.dumps(event).encode()
        out.append(line)
    return b"\n".join(out)


SHORT = ("--concurrency", "2", "--isl", "16", "--osl", "4", "--num-prompts", "4")


@pytest.mark.parametrize(("args", "proxy", "rule"), [
    pytest.param(("--warmup", "1"), {"answer": _no_text}, "zero-tokens", id="zero-tokens"),
    pytest.param(("--warmup", "1", "--concurrency", "6"), None, "concurrency-not-reached", id="concurrency"),
    pytest.param(("--warmup", "0"), None, "no-warmup", id="no-warmup"),
    pytest.param(("--warmup", "1"), {"duplicate": True}, "server-disagrees", id="server-disagrees"),
])
def test_sanity_checks_fail_a_run_that_measured_nothing_or_something_else(pd_run: dict, args: tuple, proxy: dict | None,
                                                                          rule: str) -> None:
    # each bad run made for real against the launched PD deployment: a front that drops the generated text, more
    # slots (6) than requests (4), no warm-up, a front that sends every request twice (the servers count 2x)
    with contextlib.ExitStack() as stack:
        url = pd_run["router"] if proxy is None else stack.enter_context(SlowProxy(pd_run["router"], **proxy)).url
        done, doc = _bench(pd_run, "--url", url, *SHORT, *args)
    assert done.returncode == 1, done.stdout + done.stderr
    assert doc["ok"] is False and "BENCH FAILED" in done.stdout
    (point,) = doc["points"]
    fired = {p.split(":", 1)[0] for p in point["problems"] if p.split(":", 1)[0] in RULES}
    assert fired == {rule}, point["problems"]  # that rule, and no other sanity rule, said no
    if rule != "zero-tokens":  # (0 tokens also breaks the exact output-token count)
        assert len(point["problems"]) == 1, point["problems"]
