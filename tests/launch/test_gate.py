"""Every launch path passes the gate: SGLang version (pinned, asked from the nodes, or assumed and said),
check-compat on the rendered commands, a loud --skip-compat, and local nodes that really are this machine."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from pdctl.errors import CheckFailed, UserError
from pdctl.launch.gate import ask_node, engine_version, require_local_nodes
from pdctl.render.deployment import render
from pdctl.topology import build_topology, load_topology
from tests.support.launch_e2e import pdctl
from tests.support.launch_samples import slurm_variant
from tests.support.paths import REPO

INVALID = REPO / "configs" / "invalid" / "hetero-tp-swa-layout.yaml"


def remote_without_ssh(tmp_path: Path, version: str | None = "0.5.23") -> Path:
    """configs/gpt-oss-120b-p1-d4-gb300-nixl.yaml with its nodes' ssh: removed (hosts 10.0.0.11/12)."""
    doc = yaml.safe_load((REPO / "configs" / "gpt-oss-120b-p1-d4-gb300-nixl.yaml").read_text())
    for node in doc["nodes"]:
        node.pop("ssh", None)
    doc["engine"].pop("version", None)
    if version:
        doc["engine"]["version"] = version
    path = tmp_path / "remote.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def local_sglang_topology(python: str, version: str | None = None) -> dict:
    """An SGLang topology on this machine whose engine.python is PYTHON (nothing is started from it here)."""
    engine = {"kind": "sglang", "python": python, **({"version": version} if version else {})}
    return {"name": "gate", "engine": engine, "model": {"path": "openai/gpt-oss-20b", "preset": "gpt-oss-20b"},
            "nodes": [{"name": "h0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8}],
            "transfer": {"backend": "nixl"}, "prefill": {"nodes": ["h0"], "tp": 2},
            "decode": {"nodes": ["h0"], "tp": 1, "port": 30100}}


@pytest.mark.e2e  # runs the SGLang side interpreter
def test_the_version_is_asked_from_the_nodes_python(sglang_python: str) -> None:
    topo = build_topology(local_sglang_topology(sglang_python))
    answer = ask_node(topo, topo.node("h0"))
    assert answer.version == "0.5.23" and answer.why == ""
    filled, choice = engine_version(topo, ask=True, strict=True)
    assert filled.engine.version == "0.5.23" and choice is not None
    assert (choice.source, choice.version, choice.table, choice.note) == ("nodes", "0.5.23", "0.5.23", None)


def test_a_node_without_sglang_fails_a_launch_and_is_noted_by_a_dry_run() -> None:
    topo = build_topology(local_sglang_topology(sys.executable))  # pdctl's venv: no SGLang installed
    with pytest.raises(CheckFailed) as err:
        engine_version(topo, ask=True, strict=True)
    assert "cannot read the SGLang version on node h0" in err.value.message
    _, choice = engine_version(topo, ask=True, strict=False)
    assert choice.source == "assumed" and "node h0" in choice.note and "assuming SGLang 0.5.23" in choice.note


def test_pinned_version_is_not_asked_and_unreachable_nodes_are_assumed() -> None:
    topo = build_topology(local_sglang_topology("/nonexistent/python", version="0.5.21"))
    filled, choice = engine_version(topo, ask=True, strict=True)
    assert filled is topo and (choice.source, choice.version) == ("engine.version", "0.5.21")

def test_nodes_nobody_can_reach_leave_the_version_assumed(tmp_path: Path) -> None:
    remote = load_topology(remote_without_ssh(tmp_path, version=None))
    _, choice = engine_version(remote, ask=True, strict=True)  # 10.0.0.x without ssh: nobody to ask
    assert choice.source == "assumed" and "no node could be asked" in choice.note


def test_check_compat_without_a_version_says_which_it_assumed(tmp_path: Path) -> None:
    doc = yaml.safe_load((REPO / "configs" / "gpt-oss-120b-p1-d4-gb300-nixl.yaml").read_text())
    del doc["engine"]["version"]
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump(doc))
    done = pdctl("check-compat", str(path), "--json", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["sglang"]["source"] == "assumed" and report["sglang"]["version"] == "0.5.23"
    assert "SGLang 0.5.23 (assumed" in done.stderr and "engine.version is not set" in " ".join(done.stderr.split())


def invalid(tmp_path: Path, slurm: bool) -> Path:
    """The invalid config, or its Slurm variant (a launch of it is a job)."""
    return slurm_variant(INVALID, tmp_path) if slurm else INVALID


@pytest.mark.parametrize(("extra", "slurm"), [(["--dry-run"], False), (["--dry-run"], True), ([], True)])
def test_dry_run_and_slurm_render_run_check_compat(tmp_path: Path, extra: list[str], slurm: bool) -> None:
    run = tmp_path / "run"
    done = pdctl("launch", str(invalid(tmp_path, slurm)), *extra, "--run-dir", str(run), cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    flat = " ".join(done.stderr.split())
    assert "hetero-tp-swa-layout (SGLang fails at: first transfer)" in flat and "not launching or rendering" in flat
    assert not (run / "launch.sbatch").exists() and not (run / "plan.json").exists()


@pytest.mark.parametrize("slurm", [False, True])
def test_skip_compat_renders_and_says_loudly_what_it_skipped(tmp_path: Path, slurm: bool) -> None:
    run = tmp_path / "run"
    done = pdctl("launch", str(invalid(tmp_path, slurm)), "--dry-run", "--skip-compat", "--run-dir", str(run),
                 cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    flat = " ".join(done.stderr.split())
    assert "WARNING --skip-compat: check-compat's verdict is NOT enforced" in flat
    assert "would have REFUSED it (1 error(s))" in flat and "hetero-tp-swa-layout" in flat
    if not slurm:  # the layout check-compat judged is the one rendered
        assert "SGLANG_USE_HND_KVCACHE=1" in done.stdout
    else:  # the plan shows it; the job, which renders again on its nodes, is told to skip check-compat too
        assert "SGLANG_USE_HND_KVCACHE=1" in (run / "plan.json").read_text()
        assert done.stdout.rstrip().endswith("--timeout 600 --skip-compat")  # the script --submit submits


def test_skip_compat_on_a_compatible_topology_says_it_would_have_passed(tmp_path: Path) -> None:
    config = REPO / "configs" / "gpt-oss-120b-p1-d4-gb300-nixl.yaml"
    done = pdctl("launch", str(config), "--dry-run", "--skip-compat", "--run-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert done.returncode == 0 and "it would have passed" in " ".join(done.stderr.split())


def test_local_executor_refuses_a_node_that_is_not_this_machine(tmp_path: Path) -> None:
    config = remote_without_ssh(tmp_path)
    topo = load_topology(config)
    with pytest.raises(UserError) as err:
        require_local_nodes(render(topo))
    assert "have no ssh: and are not this machine" in err.value.message and "10.0.0." in err.value.message
    ok = build_topology(local_sglang_topology("python3", "0.5.23"))
    require_local_nodes(render(ok))  # 127.0.0.1: fine
    # through the CLI: exit 2 before anything starts (nothing to stop, no run state)
    run = tmp_path / "run"
    done = pdctl("launch", str(config), "--run-dir", str(run), cwd=tmp_path)
    assert done.returncode == 2 and "not this machine" in " ".join(done.stderr.split())
    assert not (run / "state.json").exists()
