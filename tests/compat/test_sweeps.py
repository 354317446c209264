"""check-compat over a sweep (pdctl.compat.sweeps): every variant judged, one verdict each, `ok` only when all
pass, findings folded over the variants, an invalid variant failing with the `topology` finding."""

from __future__ import annotations

from pathlib import Path

import yaml

from pdctl.compat import compat_report
from pdctl.compat.sweeps import fold, sweep_report
from pdctl.models import resolve_model_spec
from pdctl.render.deployment import render
from pdctl.topology.profile import open_profile
from pdctl.topology.variants import load_sweep
from tests.support.paths import CONFIGS_DIR

EXAMPLE = CONFIGS_DIR / "sweeps" / "gpt-oss-120b-gb300-sweep.yaml"
PROFILE = CONFIGS_DIR / "clusters" / "gb300-example.yaml"


def judge(topo):
    return compat_report(render(topo), resolve_model_spec(topo.model, engine_kind=topo.engine.kind), 1024)


def test_every_variant_of_the_example_is_judged_by_its_own_release() -> None:
    doc = sweep_report(load_sweep(EXAMPLE, profile=open_profile(str(PROFILE))), judge)
    verdicts = {v["name"]: (v["ok"], [f["rule"] for f in v["findings"] if not f["ok"] and f["severity"] == "error"])
                for v in doc["variants"]}
    assert verdicts == {
        "engine.version=0.5.8_decode.tp=1": (True, []),
        "engine.version=0.5.8_decode.tp=4": (False, ["hetero-tp-swa-version"]),
        "engine.version=0.5.23_decode.tp=1": (True, []),
        "engine.version=0.5.23_decode.tp=4": (True, []),
    }
    assert not doc["ok"] and doc["sweep"] == {"params": {"engine.version": ["0.5.8", "0.5.23"], "decode.tp": [1, 4]},
                                              "zip": False}
    assert [v["sglang"]["table"] for v in doc["variants"]] == ["0.5.8", "0.5.8", "0.5.23", "0.5.23"]
    assert doc["variants"][1]["overrides"] == {"engine.version": "0.5.8", "decode.tp": 4}
    folded = next(f for f in doc["findings"] if f["rule"] == "hetero-tp-swa-version")
    assert not folded["ok"] and folded["message"].startswith(
        "fails in 1 of 4 variant(s) (engine.version=0.5.8_decode.tp=4); engine.version=0.5.8_decode.tp=4: ")
    assert all(f["ok"] for f in doc["findings"] if f["rule"] != "hetero-tp-swa-version" and f["severity"] == "error")


def test_all_pass_and_an_invalid_variant(tmp_path: Path) -> None:
    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["sweep"] = {"params": {"engine.version": ["0.5.23"], "decode.tp": [1, 4]}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(doc))
    assert sweep_report(load_sweep(path), judge)["ok"]
    doc["sweep"] = {"params": {"decode.tp": [4, 0]}}
    path.write_text(yaml.safe_dump(doc))
    report = sweep_report(load_sweep(path), judge)
    bad = report["variants"][1]
    assert not report["ok"] and not bad["ok"] and bad["findings"][0]["rule"] == "topology"
    assert "decode.tp: expected a value >= 1, got the integer 0" in bad["findings"][0]["message"]


def test_fold_names_the_failing_variants() -> None:
    ok = {"rule": "r", "severity": "error", "ok": True, "message": "fine", "fix": None}
    bad = {**ok, "ok": False, "message": "broken", "fix": "fix it"}
    variants = [{"name": f"v{i}", "findings": [bad if i % 2 else ok]} for i in range(10)]
    [folded] = fold(variants)
    assert not folded["ok"] and folded["fix"] == "fix it"
    assert folded["message"] == "fails in 5 of 10 variant(s) (v1, v3, v5 and 2 more); v1: broken"
    assert fold([{"name": "a", "findings": [ok]}])[0] == ok
