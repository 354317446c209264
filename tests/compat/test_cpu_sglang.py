"""check-compat on SGLang CPU topologies (`gpu: cpu`, engine.kind sglang): SGLang refuses NIXL heterogeneous TP
into host memory at the first transfer (nixl/conn.py _prepare_payload_xfer); pdctl predicts it, and only there."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from pdctl.cli.main import cli
from pdctl.compat.capacity import CPU_BASIS, estimate
from pdctl.compat.effective import effective
from pdctl.models import resolve_model_spec
from pdctl.render.cpu import MAX_TOTAL_TOKENS
from pdctl.render.deployment import render
from pdctl.sglang import messages
from pdctl.topology import build_topology
from tests.support.paths import REPO

MOONCAKE = REPO / "configs" / "local-cpu-sglang-mooncake.yaml"
GPU_TP2 = REPO / "configs" / "gpt-oss-20b-p2-d1-h100-nixl.yaml"
RULE = "nixl-hetero-tp-host-memory"


def judge(doc: dict, tmp_path) -> tuple[int, dict]:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = CliRunner().invoke(cli, ["check-compat", str(path), "--json", "-"])
    return result.exit_code, {f["rule"]: f for f in json.loads(result.stdout)["findings"]}


@pytest.mark.parametrize(("backend", "prefill_tp", "fires"), [
    ("nixl", 2, True), ("mooncake", 2, False), ("nixl", 1, False)])
def test_nixl_unequal_tp_into_host_memory_is_refused_at_the_first_transfer(tmp_path, backend, prefill_tp, fires):
    doc = yaml.safe_load(MOONCAKE.read_text())
    doc["transfer"]["backend"] = backend
    doc["prefill"]["tp"] = prefill_tp
    code, findings = judge(doc, tmp_path)
    finding = findings[RULE]
    assert finding["ok"] is not fires
    assert code == (1 if fires else 0)
    if fires:
        assert finding["stage"] == "first transfer"
        assert messages.NIXL_HETERO_TP_HOST in finding["message"]


def test_the_same_shape_on_gpus_is_not_refused(tmp_path):
    doc = yaml.safe_load(GPU_TP2.read_text())
    _, findings = judge(doc, tmp_path)
    assert findings[RULE]["ok"]


LLAMA_CPU = REPO / "configs" / "local-cpu-sglang.yaml"
TINY_LLAMA_BYTES_PER_TOKEN = 2 * 2 * 2 * 32 * 2  # layers x (K, V) x KV heads x head_dim x bf16


def cpu_estimates(doc: dict) -> dict:
    topo = build_topology(doc)
    spec = resolve_model_spec(topo.model, engine_kind="sglang")
    return {name: estimate(topo, spec, role) for name, role in effective(render(topo)).roles.items()}


def test_a_cpu_nodes_kv_pool_is_the_renders_max_total_tokens_in_tokens_and_bytes(tmp_path):
    doc = yaml.safe_load(LLAMA_CPU.read_text())
    got = cpu_estimates(doc)
    for role in ("prefill", "decode"):
        e = got[role]
        assert (e.tokens, e.swa_tokens, e.exact, e.gpu) == (MAX_TOTAL_TOKENS, None, True, "cpu"), e
        assert e.kv_bytes == MAX_TOTAL_TOKENS * TINY_LLAMA_BYTES_PER_TOKEN
    code, findings = judge(doc, tmp_path)
    assert code == 0 and findings["kv-capacity"]["ok"]
    assert findings["kv-capacity"]["message"] == ("prefill 4,096 tokens (2.00 MiB), decode 4,096 tokens (2.00 MiB) "
                                                  f"of KV per rank ({CPU_BASIS})")
    doc["decode"]["args"] = {"max-total-tokens": 1000}  # the role's args win; SGLang aligns it to the page (16)
    decode = cpu_estimates(doc)["decode"]
    assert (decode.tokens, decode.kv_bytes) == (992, 992 * TINY_LLAMA_BYTES_PER_TOKEN)


def test_a_gpu_nodes_pool_is_not_the_cpu_cap(tmp_path):
    doc = yaml.safe_load(LLAMA_CPU.read_text())
    doc["nodes"][0]["gpu"] = "h100"
    for role in cpu_estimates(doc).values():
        assert not role.exact and role.gpu == "h100" and role.why != CPU_BASIS, role
    doc["nodes"][0]["gpu"] = "cpu"
    doc["server"]["args"] = {"max-total-tokens": None}  # no cap rendered: the pool is a share of host memory
    for role in cpu_estimates(doc).values():
        assert role.tokens is None and "share of the host's memory" in (role.why or ""), role
