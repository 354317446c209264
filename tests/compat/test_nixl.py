"""NIXL and --disaggregation-ib-device by release (sglang PR #28737, read off the wheels): the invalid configs
fail (tests/compat/test_rules.py); here the controls that must pass, and what the finding tells the user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from pdctl.compat import evaluate
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology import build_topology

INVALID = Path(__file__).resolve().parents[2] / "configs" / "invalid"


def findings(name: str, **changes: Any) -> dict[str, Any]:
    doc = yaml.safe_load((INVALID / f"{name}.yaml").read_text())
    for dotted, value in changes.items():
        node = doc
        *parents, last = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value
    topo = build_topology(doc)
    return {f.rule: f for f in evaluate(render(topo), resolve_model_spec(topo.model))}


def test_ignored_ib_device_names_the_ucx_setting() -> None:
    f = findings("nixl-ib-device")["nixl-ib-device"]
    assert not f.ok and "UCX_NET_DEVICES=mlx5_0:1" in f.message and "pull/28737" in f.message


@pytest.mark.parametrize("changes", [
    {"engine.env": {"UCX_NET_DEVICES": "mlx5_0:1"}},  # UCX told which devices
    {"decode.env": {"UCX_NET_DEVICES": "mlx5_0:1"}, "prefill.env": {"UCX_NET_DEVICES": "mlx5_0:1"}},
    {"engine.version": "0.5.23"},  # NIXL reads the flag
    {"transfer.backend": "mooncake"},  # Mooncake always did
])
def test_controls_pass(changes: dict[str, Any]) -> None:
    assert findings("nixl-ib-device", **changes)["nixl-ib-device"].ok


def test_port_suffix_is_fine_when_ucx_net_devices_rules() -> None:
    # 0.5.23 ignores the flag (with a warning) when UCX_NET_DEVICES is set: nothing to refuse
    assert findings("nixl-ib-device-port", **{"engine.env": {"UCX_NET_DEVICES": "mlx5_0:1"}})["nixl-ib-device-port"].ok
    assert findings("nixl-ib-device-port", **{"engine.version": "0.5.22",
                                               "engine.env": {"UCX_NET_DEVICES": "mlx5_0:1"}})["nixl-ib-device-port"].ok
