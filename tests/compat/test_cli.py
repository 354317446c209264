"""The CLI end to end: exit codes 0/1/2, JSON documents, no heavy imports, speed of check-compat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

ROOT = Path(__file__).resolve().parents[2]
VALID = sorted((ROOT / "configs").glob("*.yaml"))
HEAVY = ("torch", "datasets", "numpy", "matplotlib", "fastapi", "safetensors", "pandas")


def pdctl(*args: str, pyflags: tuple[str, ...] = (), env: dict[str, str] | None = None, timeout: float = 60):
    """Run `python [pyflags] -m pdctl ARGS` from the repository root in a fresh interpreter."""
    return subprocess.run([sys.executable, *pyflags, "-m", "pdctl", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})}, check=False)


def test_valid_configs_exist():
    assert VALID, "configs/*.yaml (written by the topology part) are missing"


@pytest.mark.parametrize("path", VALID, ids=[p.name for p in VALID])
def test_every_example_config_passes(path, monkeypatch):
    from pdctl.cli.main import cli

    monkeypatch.chdir(ROOT)
    result = CliRunner().invoke(cli, ["check-compat", str(path), "--json", "-"])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["ok"] is True and all(f["ok"] or f["severity"] != "error" for f in doc["findings"])


def test_check_compat_json_stdout_and_exit_0():
    r = pdctl("check-compat", "configs/gpt-oss-120b-p1-d4-gb300-nixl.yaml", "--json", "-", "--tokens", "4096")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)  # stdout is only the JSON document; the tables went to stderr
    assert {"ok", "topology", "model", "findings", "heads", "attn_tp", "transfer"} <= set(doc)
    assert doc["ok"] is True and doc["transfer"]["tokens"] == 4096
    assert doc["attn_tp"]["prefill"]["attn_tp"] == 1 and doc["attn_tp"]["decode"]["attn_tp"] == 4
    for f in doc["findings"]:
        assert set(f) >= {"rule", "severity", "ok", "message", "fix"}
    assert "compatibility rules" in r.stderr


def test_check_compat_incompatible_exit_1(tmp_path):
    out = tmp_path / "report.json"
    r = pdctl("check-compat", "configs/invalid/hetero-tp-swa-pp.yaml", "--json", str(out))
    assert r.returncode == 1
    assert "hetero-tp-swa-pp" in r.stdout + r.stderr and "Traceback" not in r.stderr
    doc = json.loads(out.read_text())
    assert doc["ok"] is False
    bad = [f for f in doc["findings"] if not f["ok"]]
    assert [f["rule"] for f in bad] == ["hetero-tp-swa-pp"] and bad[0]["fix"]


@pytest.mark.parametrize("args,needle", [
    (["check-compat", "configs/does-not-exist.yaml"], "no such topology file"),
    (["check-compat", "configs/gpt-oss-120b-p1-d4-gb300-nixl.yaml", "--tokens", "0"], "tokens"),
    (["plan", "configs/gpt-oss-120b-p1-d4-gb300-nixl.yaml", "--tokens", "10", "--prefix", "20"], "--prefix"),
])
def test_bad_input_exit_2(args, needle):
    r = pdctl(*args)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_bad_yaml_and_unresolvable_model_exit_2(tmp_path):
    from pdctl.cli.main import cli

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nnodes: [\n")
    runner = CliRunner()
    result = runner.invoke(cli, ["check-compat", str(bad)])
    assert result.exit_code != 0
    unknown = tmp_path / "unknown.yaml"
    text = (ROOT / "configs/gpt-oss-120b-p1-d4-gb300-nixl.yaml").read_text()
    unknown.write_text(text.replace("openai/gpt-oss-120b", "acme/mystery-model-7b").replace("preset:", "#preset:"))
    r = pdctl("check-compat", str(unknown), env={"HF_HOME": str(tmp_path / "hf")})
    assert r.returncode == 2, r.stderr
    flat = " ".join(r.stderr.split())
    assert "cannot resolve the model spec" in flat and "mystery-model-7b" in flat
    assert "Traceback" not in r.stderr


def test_plan_json_and_unplannable(tmp_path):
    r = pdctl("plan", "configs/gpt-oss-20b-p2-d1-h100-nixl.yaml", "--tokens", "1000", "--json", "-")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    pairs = doc["transfer"]["pairs"]
    assert [(p["prefill_rank"], p["decode_rank"]) for p in pairs] == [(0, 0), (1, 0)]
    assert [p["dst_head_start"] for p in pairs] == [0, 4] and all(p["num_heads"] == 4 for p in pairs)
    assert {"src_head_start", "full_descriptors", "full_bytes", "swa_descriptors", "swa_bytes"} <= set(pairs[0])
    r = pdctl("plan", "configs/invalid/attn-tp-ratio.yaml", "--force")
    assert r.returncode == 1 and "do not map onto each other" in " ".join((r.stdout + r.stderr).split())


def test_plan_of_a_rejected_topology_is_exit_1_with_the_findings(tmp_path):
    out = tmp_path / "plan.json"
    r = pdctl("plan", "configs/invalid/hetero-tp-swa-pp.yaml", "--json", str(out))
    assert r.returncode == 1, r.stderr
    doc = json.loads(out.read_text())
    assert doc["ok"] is False and [f["rule"] for f in doc["findings"]] == ["hetero-tp-swa-pp"]
    assert doc["findings"][0]["stage"] == "first transfer" and "transfer" not in doc
    flat = " ".join(r.stderr.split()) + " ".join(r.stdout.split())
    assert "--force" in flat and "hetero-tp-swa-pp" in flat
    # --force: the findings, then the plan, still exit 1
    r = pdctl("plan", "configs/invalid/hetero-tp-swa-pp.yaml", "--force", "--json", "-")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert doc["ok"] is False and doc["transfer"]["pairs"] and doc["findings"]


def test_schema_prints_json_schema():
    r = pdctl("schema")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["$schema"].startswith("https://json-schema.org/") and "prefill" in doc["properties"]


def _imported_modules(stderr: str) -> set[str]:
    mods = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            mods.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return mods


@pytest.mark.parametrize("args", [["--help"], ["check-compat", "configs/gpt-oss-120b-p1-d4-gb300-nixl.yaml"],
                                  ["plan", "configs/local-cpu.yaml"]])
def test_no_heavy_imports(args):
    r = pdctl(*args, pyflags=("-X", "importtime"))
    assert r.returncode == 0, r.stderr[-2000:]
    mods = _imported_modules(r.stderr)
    assert "pdctl" in mods
    assert not set(HEAVY) & mods, set(HEAVY) & mods


