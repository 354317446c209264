"""check-compat on SGLang CPU topologies (`gpu: cpu`, engine.kind sglang): SGLang refuses NIXL heterogeneous TP
into host memory at the first transfer (nixl/conn.py _prepare_payload_xfer); pdctl predicts it, and only there."""

from __future__ import annotations

import json

import pytest
import yaml
from click.testing import CliRunner

from pdctl.cli.main import cli
from pdctl.sglang import messages
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
