"""The cluster profile (pdctl.topology.profile): found by --cluster, $PDCTL_CLUSTER or pdctl-cluster.yaml up
the tree; its slurm defaults, env defaults and aliases applied under the topology's own values; what it
resolved recorded; an unknown alias is bad input naming the profile and its aliases."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from pdctl.errors import UserError
from pdctl.topology import load_topology
from pdctl.topology.profile import PROFILE_ENV, find_profile, open_profile
from tests.support.paths import CONFIGS_DIR

PROFILE = {
    "name": "lab",
    "slurm": {"account": "llm", "partition": "gb300", "time_limit": "04:00:00", "sbatch_directives": ["--comment=p"],
              "segment": True, "exclusive": False},
    "containers": {"sglang-0.5.8": "lmsysorg/sglang:v0.5.8-cu130"},
    "models": {"gpt-oss-120b": "/shared/models/gpt-oss-120b"},
    "env": {"NCCL_DEBUG": "WARN", "HF_HUB_OFFLINE": "1"},
}
TOPO = {
    "name": "t",
    "engine": {"version": "0.5.8", "container": {"image": "sglang-0.5.8"}, "env": {"HF_HUB_OFFLINE": "0"}},
    "model": {"path": "gpt-oss-120b", "preset": "gpt-oss-120b"},
    "slurm": {"partition": "debug", "sbatch_directives": ["--mail-type=END"]},
    "nodes": [{"name": "p0", "gpu": "gb300", "gpus": 4}, {"name": "d0", "gpu": "gb300", "gpus": 4}],
    "prefill": {"nodes": ["p0"]}, "decode": {"nodes": ["d0"], "tp": 4},
}


def write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path]:
    return write(tmp_path / "profile.yaml", PROFILE), write(tmp_path / "t.yaml", TOPO)


def test_the_profile_fills_in_and_resolves_under_the_topologys_values(files) -> None:
    profile, topo_path = files
    topo = load_topology(topo_path, profile=open_profile(str(profile)))
    slurm = topo.slurm
    assert (slurm.account, slurm.partition, slurm.time_limit, slurm.segment, slurm.exclusive) == (
        "llm", "debug", "04:00:00", True, False)  # partition: the topology's own
    assert slurm.sbatch_directives == ["--comment=p", "--mail-type=END"]  # the profile's, then the topology's
    assert topo.engine.env == {"NCCL_DEBUG": "WARN", "HF_HUB_OFFLINE": "0"}
    assert topo.engine.container.image == "lmsysorg/sglang:v0.5.8-cu130"
    assert topo.model.path == "/shared/models/gpt-oss-120b"
    resolved = topo.profile["resolved"]
    assert topo.profile["path"] == str(profile) and topo.profile["name"] == "lab"
    assert resolved["model.path"] == {"alias": "gpt-oss-120b", "value": "/shared/models/gpt-oss-120b", "from": "profile"}
    assert resolved["engine.container.image"]["alias"] == "sglang-0.5.8"
    assert resolved["slurm.account"] == {"value": "llm", "from": "profile"} and "slurm.partition" not in resolved
    assert "engine.env.HF_HUB_OFFLINE" not in resolved and resolved["engine.env.NCCL_DEBUG"]["value"] == "WARN"
    assert topo.document["model"]["path"] == "/shared/models/gpt-oss-120b"  # what a run keeps as topology.yaml


def test_without_a_profile_nothing_changes(files) -> None:
    _, topo_path = files
    topo = load_topology(topo_path)
    assert topo.profile is None and topo.document is None and topo.slurm.account is None
    assert topo.model.path == "gpt-oss-120b" and topo.engine.container.image == "sglang-0.5.8"


def test_a_topology_not_on_slurm_gets_no_slurm_section(files, tmp_path: Path) -> None:
    profile, _ = files
    topo = load_topology(CONFIGS_DIR / "local-cpu.yaml", profile=open_profile(str(profile)))
    assert topo.slurm is None and topo.engine.env["NCCL_DEBUG"] == "WARN"


@pytest.mark.parametrize(("key", "value", "what"), [
    ("model.path", "gpt-oss-12b", "model alias"), ("engine.container.image", "sglang-0.5.9", "container alias")])
def test_an_unknown_alias_names_the_profile_and_its_aliases(files, key: str, value: str, what: str) -> None:
    profile, topo_path = files
    with pytest.raises(UserError) as err:
        load_topology(topo_path, [f"{key}={value}"], profile=open_profile(str(profile)))
    message = err.value.message
    assert f"{key}: {value!r} is not a {what} of the cluster profile {profile}" in message
    assert "gpt-oss-120b" in message if what == "model alias" else "sglang-0.5.8" in message
    assert message.startswith(f"--set {key}={value}: ")  # located where the value was written


def test_full_references_pass_through(files) -> None:
    profile, topo_path = files
    topo = load_topology(topo_path, ["model.path=openai/gpt-oss-120b", "engine.container.image=/shared/x.sqsh"],
                         profile=open_profile(str(profile)))
    assert topo.model.path == "openai/gpt-oss-120b" and topo.engine.container.image == "/shared/x.sqsh"
    assert "model.path" not in topo.profile["resolved"]


def test_discovery_order(files, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profile, _ = files
    deep = tmp_path / "a" / "b"
    deep.mkdir(parents=True)
    monkeypatch.delenv(PROFILE_ENV, raising=False)
    assert find_profile(None, deep) is None
    found = write(tmp_path / "pdctl-cluster.yaml", PROFILE)
    assert find_profile(None, deep) == found  # a parent's pdctl-cluster.yaml
    monkeypatch.setenv(PROFILE_ENV, str(profile))
    assert find_profile(None, deep) == profile  # $PDCTL_CLUSTER before discovery
    other = write(tmp_path / "other.yaml", PROFILE)
    assert find_profile(str(other), deep) == other  # --cluster before both
    assert find_profile("none", deep) is None
    monkeypatch.setenv(PROFILE_ENV, "none")
    assert find_profile(None, deep) is None
    with pytest.raises(UserError, match=r"^--cluster /nope.yaml: no such cluster profile file$"):
        find_profile("/nope.yaml", deep)
    monkeypatch.setenv(PROFILE_ENV, "/nope.yaml")
    with pytest.raises(UserError, match=r"^\$PDCTL_CLUSTER /nope.yaml: no such cluster profile file$"):
        find_profile(None, deep)


def test_a_bad_profile_is_located(tmp_path: Path) -> None:
    bad = tmp_path / "p.yaml"
    bad.write_text("slurm:\n  acount: x\ncontainers: [a]\nmodels: {m: /x}\n")
    with pytest.raises(UserError) as err:
        open_profile(str(bad))
    lines = err.value.message.splitlines()
    assert lines == [f"{bad}:2:3: slurm.acount: unknown key 'acount'; did you mean 'account'?",
                     f"{bad}:3:13: containers: expected a mapping, got a list"]


def test_the_example_profile_loads() -> None:
    loaded = open_profile(str(CONFIGS_DIR / "clusters" / "gb300-example.yaml"))
    assert loaded.profile.slurm.segment is True and "sglang-0.5.8" in loaded.profile.containers
