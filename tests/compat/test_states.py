"""State components besides the KV pages (hybrid linear attention's mamba state, DSA's indexer keys): the
shipped Qwen3-Next / DeepSeek-V3.2 examples load, plan and are judged per release and backend (ranges read off
the wheels: pdctl/sglang/facts.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pdctl.compat import evaluate
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology import build_topology

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
QWEN = CONFIGS / "qwen3-next-80b-p2-d4-h200-nixl.yaml"
DSV32 = CONFIGS / "deepseek-v3.2-p8-d8-h200-mooncake.yaml"
RULES = ("state-transfer-backend", "mamba-hetero-tp")


def verdicts(path: Path, version: str, backend: str, decode_tp: int | None = None) -> dict[str, bool]:
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    doc["engine"]["version"] = version
    doc["transfer"]["backend"] = backend
    if decode_tp is not None:
        doc["decode"]["tp"] = decode_tp
    topo = build_topology(doc)
    findings = {f.rule: f for f in evaluate(render(topo), resolve_model_spec(topo.model))}
    return {rule: findings[rule].ok for rule in RULES}


@pytest.mark.parametrize(("version", "backend", "decode_tp", "ok"), [
    # prefill TP2: decode TP2 moves whole slots, TP4 slices them per rank
    ("0.5.23", "nixl", 4, {"state-transfer-backend": True, "mamba-hetero-tp": True}),
    ("0.5.11", "nixl", 4, {"state-transfer-backend": True, "mamba-hetero-tp": True}),
    ("0.5.10", "nixl", 4, {"state-transfer-backend": True, "mamba-hetero-tp": False}),
    ("0.5.10", "nixl", 2, {"state-transfer-backend": True, "mamba-hetero-tp": True}),
    ("0.5.8", "nixl", 2, {"state-transfer-backend": False, "mamba-hetero-tp": True}),
    ("0.5.9", "mooncake", 4, {"state-transfer-backend": True, "mamba-hetero-tp": True}),
    ("0.5.8", "mooncake", 4, {"state-transfer-backend": True, "mamba-hetero-tp": False}),
    ("0.5.8", "mooncake", 2, {"state-transfer-backend": True, "mamba-hetero-tp": True}),
])
def test_hybrid_linear_per_release(version: str, backend: str, decode_tp: int, ok: dict[str, bool]) -> None:
    assert verdicts(QWEN, version, backend, decode_tp) == ok


@pytest.mark.parametrize(("version", "backend", "ok"), [
    ("0.5.23", "mooncake", True), ("0.5.8", "mooncake", True), ("0.5.9", "nixl", True), ("0.5.8", "nixl", False),
])
def test_dsa_indexer_per_release(version: str, backend: str, ok: bool) -> None:
    assert verdicts(DSV32, version, backend)["state-transfer-backend"] is ok


def test_shipped_examples_pass_every_rule() -> None:
    for path in (QWEN, DSV32):
        topo = build_topology(yaml.safe_load(path.read_text()))
        bad = [f.rule for f in evaluate(render(topo), resolve_model_spec(topo.model)) if f.is_error and not f.ok]
        assert bad == [], (path.name, bad)
