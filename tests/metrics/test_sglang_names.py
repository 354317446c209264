"""The reference engine's /metrics against SGLang 0.5.23's own metrics code (the `make sglang-env` wheel):
every `sglang:` metric it exposes is one SGLang defines, of the same type, and the latency and KV-transfer
histograms have SGLang's bucket boundaries. Read from SGLang's source with `ast` (its collectors need a
running server's context to be instantiated)."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from pdctl.metrics import names as N
from pdctl.metrics.engine import EngineMetrics, Load

pytestmark = [pytest.mark.e2e]  # runs the SGLang side interpreter

KINDS = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary"}
DEFAULT_BUCKETS = {"bucket_time_to_first_token": N.TTFT, "bucket_e2e_request_latency": N.E2E,
                   "bucket_inter_token_latency": N.ITL}


def collector_source(python: str) -> str:
    """SGLang's metrics_collector.py, found through the side interpreter without importing SGLang."""
    where = subprocess.run(
        [python, "-c", "import importlib.util; print(importlib.util.find_spec('sglang').submodule_search_locations[0])"],
        capture_output=True, text=True, timeout=60, check=True).stdout.strip()
    return (Path(where) / "srt" / "observability" / "metrics_collector.py").read_text()


def sglang_definitions(source: str) -> tuple[dict[str, str], dict[str, tuple[float, ...]]]:
    """{metric name: type} and {metric name: default buckets} as SGLang's code defines them."""
    kinds: dict[str, str] = {}
    buckets: dict[str, tuple[float, ...]] = {}
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in KINDS:
            kw = {k.arg: k.value for k in node.keywords}
            if isinstance(kw.get("name"), ast.Constant):
                kinds[kw["name"].value] = KINDS[node.func.id]
                if isinstance(kw.get("buckets"), (ast.Tuple, ast.List)):
                    buckets[kw["name"].value] = tuple(ast.literal_eval(kw["buckets"]))
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id in DEFAULT_BUCKETS:
                    buckets[DEFAULT_BUCKETS[target.id]] = tuple(ast.literal_eval(node.value))
    return kinds, buckets


def test_names_types_and_buckets_are_sglangs(sglang_python: str) -> None:
    kinds, buckets = sglang_definitions(collector_source(sglang_python))
    assert len(kinds) > 100 and N.TTFT in buckets  # the parse found SGLang's definitions
    load = Load(running=1, queued=0, transferring=0, full_capacity=64, full_used=16, full_available=48,
                full_evictable=0, swa_capacity=64, swa_used=0, swa_available=64, swa_evictable=0)
    metrics = EngineMetrics(model_name="m", role="decode", page_size=16, context_len=4096, load=lambda: load)
    ours = {f.name + ("_total" if f.type == "counter" else ""): f.type
            for f in text_string_to_metric_families(metrics.exposition().decode())
            if not f.name.endswith("_created")}  # prometheus-client's creation stamps of counters/histograms
    sglang_named = {name: kind for name, kind in ours.items() if name.startswith("sglang:")}
    assert len(sglang_named) >= 25
    for name, kind in sglang_named.items():
        assert kinds.get(name) == kind, f"{name}: pdctl exposes a {kind}, SGLang 0.5.23 has {kinds.get(name)}"
    assert not [n for n in ours if not n.startswith(("sglang:", "pdctl:"))]  # pdctl's own are prefixed pdctl:
    for name, ours_buckets in {N.TTFT: N.TTFT_BUCKETS, N.E2E: N.E2E_BUCKETS, N.ITL: N.ITL_BUCKETS,
                               N.KV_TRANSFER_LATENCY_MS: N.KV_LATENCY_MS_BUCKETS,
                               N.KV_TRANSFER_TOTAL_MB: N.KV_TOTAL_MB_BUCKETS,
                               N.KV_TRANSFER_SPEED: N.KV_SPEED_BUCKETS}.items():
        assert tuple(float(b) for b in buckets[name]) == tuple(float(b) for b in ours_buckets), name
