"""pdctl.metrics.capacity: the KV pool a server reports beside pdctl's estimate. The server side is /server_info
as SGLang 0.5.23's own servers answered it on CPU nodes (captured: tests/metrics/data/README.md); the estimate
is check-compat's for the same topology. A wrong estimate, or a pool the topology does not fix, is `differs`."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from pdctl.compat.capacity import CPU_BASIS, KvEstimate, estimate
from pdctl.compat.effective import effective
from pdctl.metrics.capacity import ServerPool, compare, pool_of
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology import build_topology
from tests.support.paths import REPO

DATA = Path(__file__).parent / "data"
LLAMA_DECODE = DATA / "sglang-0.5.23-cpu-llama-decode.server_info.json"
GPT_OSS = DATA / "sglang-0.5.23-cpu-gpt-oss-colocated.server_info.json"


def _info(path: Path) -> dict:
    return json.loads(path.read_text())


def cpu_estimate(tmp_path: Path, role: str, model_config: Path | None = None) -> KvEstimate:
    """check-compat's estimate for ROLE of configs/local-cpu-sglang.yaml (or its colocated reference on the model
    whose config.json is MODEL_CONFIG)."""
    name = "local-cpu-sglang.yaml" if model_config is None else "local-cpu-sglang-reference.yaml"
    doc = yaml.safe_load((REPO / "configs" / name).read_text())
    if model_config is not None:
        model = tmp_path / "model"
        model.mkdir()
        shutil.copy(model_config, model / "config.json")
        doc["model"] = {"path": str(model)}
    topo = build_topology(doc)
    spec = resolve_model_spec(topo.model, engine_kind="sglang")
    return estimate(topo, spec, effective(render(topo)).roles[role])


def test_the_pools_sglang_reports_are_read_from_its_server_info() -> None:
    llama = pool_of(_info(LLAMA_DECODE))
    assert llama is not None and llama.tokens == 4096 and llama.swa_tokens is None and llama.kv_gib is not None
    gpt_oss = pool_of(_info(GPT_OSS))
    assert gpt_oss is not None and gpt_oss.swa_tokens is not None and 0 < gpt_oss.swa_tokens < gpt_oss.tokens
    assert pool_of({"internal_states": [{"max_total_num_tokens": 512}]}) == ServerPool(512)  # older releases
    assert pool_of({"version": "0.5.23"}) is None and pool_of(["not", "a", "dict"]) is None


def test_a_cpu_nodes_estimate_agrees_with_the_pool_sglang_reported(tmp_path: Path) -> None:
    est = cpu_estimate(tmp_path, "decode")
    got = compare(pool_of(_info(LLAMA_DECODE)), est)
    assert got["verdict"] == "agrees" and got["ratio"] == 1.0 and got["basis"] == CPU_BASIS, got
    assert got["estimate_bytes"] == est.kv_bytes and got["kv_gib"] is not None
    swa = compare(pool_of(_info(GPT_OSS)), cpu_estimate(tmp_path, "colocated", DATA / "tiny-gpt-oss.config.json"))
    assert swa["verdict"] == "agrees" and swa["swa_max_total_num_tokens"] == swa["swa_estimate"], swa


@pytest.mark.parametrize("wrong", [{"tokens": 4080}, {"tokens": 4112}, {"swa_tokens": 16}])
def test_a_wrong_cpu_estimate_is_a_disagreement(tmp_path: Path, wrong: dict) -> None:
    est = cpu_estimate(tmp_path, "colocated", DATA / "tiny-gpt-oss.config.json")
    got = compare(pool_of(_info(GPT_OSS)), replace(est, **wrong))  # exact: one page off is already wrong
    assert got["verdict"] == "differs" and "disagree" in got["detail"], got


def test_a_gpu_estimate_agrees_within_a_quarter_and_differs_beyond(tmp_path: Path) -> None:
    gpu = replace(cpu_estimate(tmp_path, "decode"), gpu="h100", exact=False, why=None)
    assert compare(ServerPool(4096), replace(gpu, tokens=3600))["verdict"] == "agrees"
    off = compare(ServerPool(4096), replace(gpu, tokens=2048))
    assert off["verdict"] == "differs" and off["ratio"] == 2.0 and "x2.00" in off["detail"], off


def test_without_a_pool_or_an_estimate_the_verdict_is_unknown(tmp_path: Path) -> None:
    est = cpu_estimate(tmp_path, "decode")
    unreachable = compare(None, est, why="HTTP 404")
    assert unreachable["verdict"] == "unknown" and unreachable["detail"] == "HTTP 404", unreachable
    blind = compare(ServerPool(4096), replace(est, tokens=None, why="no GPU memory known for its nodes"))
    assert blind["verdict"] == "unknown" and blind["detail"] == "no GPU memory known for its nodes"
