"""`pdctl suggest` as a user runs it: bad input is exit 2 with the choices, nothing feasible is exit 1 with the
nearest misses, and `--out` writes a topology that passes check-compat and `launch --dry-run` (the real CLI in
a subprocess; AIConfigurator's rows come from the tests' cache, tests/support/suggest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pdctl.extras import missing_module_error
from tests.support.paths import CONFIGS_DIR, REPO
from tests.support.suggest import cli_env

REF = ["--isl", "8192", "--osl", "1024", "--ttft", "2000", "--itl", "30"]
GB300 = ["--model", "gpt-oss-120b", "--system", "gb300", "--gpus", "8", *REF]


def pdctl(*args: str, cwd: Path | None = None, pyflags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *pyflags, "-m", "pdctl", *args], capture_output=True, text=True,
                          cwd=cwd or REPO, env=cli_env(), timeout=900, check=False)


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "gpt-oss-999b", "--system", "gb300", "--gpus", "8", *REF],
     "unknown model 'gpt-oss-999b'; models: deepseek-v3, gpt-oss-120b, gpt-oss-20b, llama-3.1-8b"),
    (["--model", "gpt-oss-120b", "--system", "a100", "--gpus", "8", *REF],
     "unknown system 'a100'; systems: b200, gb200, gb300, h100, h200"),
    ([*GB300, "--version", "0.4.9"], "unknown SGLang version '0.4.9': pdctl has SGLang's rules for 0.5.0rc2, 0.5.1,"),
    (["--model", "gpt-oss-120b", "--system", "gb300", "--gpus", "8", "--isl", "8192", "--osl", "1024",
      "--ttft", "0", "--itl", "30"], "impossible target --ttft 0"),
    (["--model", "gpt-oss-120b", "--system", "gb300", "--gpus", "8", "--isl", "8192", "--osl", "1024",
      "--ttft", "2000", "--itl", "nan"], "impossible target --itl nan"),
    (["--model", "gpt-oss-120b", "--system", "gb300", "--gpus", "1", *REF], "too few GPUs: --gpus 1"),
    (["--model", "gpt-oss-120b", *REF], "give a TOPOLOGY skeleton, or --system, --gpus"),
    ([*GB300, "--link-gbps", "5", "--transfer-from", "x.json"], "give either --transfer-from"),
    ([*GB300, "--transfer-from", "/nonexistent/bench.json"], "cannot read it"),
    ([str(CONFIGS_DIR / "local-cpu.yaml"), *REF], "GPUs of one kind, one of b200, gb200, gb300, h100, h200"),
    ([str(CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"), "--model", "gpt-oss-20b", *REF],
     "drop --model / --system"),
    ([str(CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"), "--gpus", "16", *REF],
     "the topology's gb300 nodes have 8 GPUs"),
    (["--model", "deepseek-v3", "--system", "h100", "--gpus", "2", *REF],
     "too few GPUs: deepseek-v3 does not fit in any worker of 2 h100 GPU(s)"),
])
def test_bad_input_is_exit_2_with_the_choices(tmp_path, args: list[str], message: str) -> None:
    out = tmp_path / "doc.json"
    done = pdctl("suggest", *args, "--json", str(out), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert message in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr
    doc = json.loads(out.read_text())
    assert doc["ok"] is False and message.split(":")[0] in doc["error"]


def test_no_feasible_candidate_is_exit_1_with_the_nearest_misses(tmp_path) -> None:
    done = pdctl("suggest", "--model", "gpt-oss-120b", "--system", "gb300", "--gpus", "8", "--isl", "8192",
                 "--osl", "1024", "--ttft", "2000", "--itl", "2", "--json", "-", cwd=tmp_path)
    assert done.returncode == 1, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is False and doc["best"] is None and doc["candidates"]
    first = doc["candidates"][0]
    assert first["verdict"] == "rejected" and "itl-target" in {r["rule"] for r in first["rules"]}
    err = " ".join(done.stderr.split())
    assert "no candidate meets TTFT 2000 ms / ITL 2 ms on 8 gb300 GPUs; nearest misses:" in err
    assert "itl-target: ITL" in err and "nearest misses" in err


def test_out_writes_the_best_as_a_topology_that_passes_check_compat_and_a_dry_run(tmp_path) -> None:
    out = tmp_path / "best.yaml"
    done = pdctl("suggest", *GB300, "--out", str(out), "--json", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads(done.stdout)
    assert doc["ok"] is True and doc["best"] == 0 and doc["out"]["path"] == str(out)
    best = doc["candidates"][0]
    assert best["verdict"] == "ok" and best["rules"] == []
    assert best["ttft_ms"] <= 2000 and best["itl_ms"] <= 30
    topo = yaml.safe_load(out.read_text())
    assert topo["prefill"]["tp"] == best["prefill"]["tp"] and topo["decode"]["replicas"] == best["decode"]["replicas"]
    predicted = topo["bench"]["predicted"]
    assert predicted["targets"] == {"ttft_ms": 2000.0, "itl_ms": 30.0}
    assert (predicted["ttft_ms"], predicted["itl_ms"]) == (best["ttft_ms"], best["itl_ms"])
    assert topo["bench"]["serve"]["concurrency"] == [best["concurrency"]] and topo["bench"]["serve"]["isl"] == [8192]
    check = pdctl("check-compat", str(out), cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    dry = pdctl("launch", str(out), "--dry-run", "--run-dir", str(tmp_path / "run"), cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert "--disaggregation-mode decode" in dry.stdout
    if best["decode"]["ep"] > 1:
        assert f"--ep-size {best['decode']['ep']}" in dry.stdout
    assert f"--max-running-requests {best['decode']['max_running_requests']}" in dry.stdout


def test_a_skeleton_keeps_its_machines_and_settings(tmp_path) -> None:
    out = tmp_path / "best.yaml"
    skeleton = CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"
    done = pdctl("suggest", str(skeleton), *REF, "--backend", "mooncake", "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    written, original = yaml.safe_load(out.read_text()), yaml.safe_load(skeleton.read_text())
    assert written["nodes"] == original["nodes"] and written["name"] == original["name"]
    assert written["transfer"]["backend"] == "mooncake" and written["server"] == original["server"]
    assert written["prefill"]["port"] == 30000 and written["decode"]["port"] == 30100
    assert pdctl("check-compat", str(out), cwd=tmp_path).returncode == 0


def test_no_aiconfigurator_or_pandas_at_import_time_of_help_and_bad_input() -> None:
    for args in (["suggest", "--help"], ["suggest", "--model", "nope", "--system", "gb300", "--gpus", "8", *REF]):
        done = pdctl(*args, pyflags=("-X", "importtime"))
        assert done.returncode in (0, 2), done.stderr[-2000:]
        mods = {line.rsplit("|", 1)[1].strip().split(".")[0] for line in done.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
        assert "pdctl" in mods and not {"aiconfigurator", "aiconfigurator_core", "pandas", "numpy"} & mods, mods


def test_a_missing_extra_names_it() -> None:
    error = missing_module_error(ModuleNotFoundError(name="aiconfigurator"), "pdctl suggest")
    assert error is not None and "'suggest' extra" in error.message and "pdctl[suggest]" in error.detail
