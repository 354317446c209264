"""`pdctl schema` describes every form the loader accepts: each configs/*.yaml and each YAML example in the
docs validates against it with the jsonschema library, and the loader and the schema agree on the forms that
are normalised on load (engine.env scalars, ssh.options as a mapping or a list, args values)."""

from __future__ import annotations

import copy
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from pdctl.errors import UserError
from pdctl.topology import build_topology
from pdctl.topology.schema import topology_json_schema
from tests.support.paths import REPO

SCHEMA = topology_json_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)
CONFIGS = (sorted((REPO / "configs").glob("*.yaml")) + sorted((REPO / "configs" / "invalid").glob("*.yaml"))
           + sorted((REPO / "configs" / "sweeps").glob("*.yaml")))
DOCS = sorted((REPO / "docs").glob("*.md")) + [REPO / "README.md"]
TOP_KEYS = set(SCHEMA["properties"])


def fragment_validator() -> jsonschema.Draft202012Validator:
    """The schema without its top-level requirements: for docs examples that show a few sections."""
    relaxed = copy.deepcopy(SCHEMA)
    for key in ("required", "allOf"):
        relaxed.pop(key, None)
    return jsonschema.Draft202012Validator(relaxed)


def errors(validator: jsonschema.Draft202012Validator, doc: Any) -> list[str]:
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(doc)]


def doc_examples() -> list[tuple[str, Any]]:
    """Every ```yaml block of the docs that parses to a topology or a part of one (top-level keys)."""
    out = []
    for path in DOCS:
        for i, m in enumerate(re.finditer(r"```yaml\n(.*?)```", path.read_text(), re.DOTALL)):
            doc = yaml.safe_load(m.group(1))
            if isinstance(doc, dict) and set(doc) <= TOP_KEYS:
                out.append((f"{path.name}#{i}", doc))
    return out


def test_the_schema_is_a_valid_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(REPO)))
def test_every_config_validates(path: Path) -> None:
    assert errors(VALIDATOR, yaml.safe_load(path.read_text())) == []


def test_docs_examples_validate() -> None:
    examples = doc_examples()
    assert len(examples) >= 3, "docs/topology.md shows its forms as ```yaml examples"
    partial = fragment_validator()
    for name, doc in examples:
        full = {"name", "model", "nodes"} <= set(doc)
        assert errors(VALIDATOR if full else partial, doc) == [], name
        if full:
            build_topology(doc, source=name)  # and the loader takes it too


BASE = {"name": "forms", "model": {"path": "openai/gpt-oss-20b"},
        "nodes": [{"name": "n0", "host": "127.0.0.1", "gpu": "h100", "gpus": 8}],
        "prefill": {"nodes": ["n0"]}, "decode": {"nodes": ["n0"], "port": 30200}}


@pytest.mark.parametrize("over", [
    {"engine": {"env": {"NCCL_DEBUG": "INFO", "UCX_LOG_LEVEL": 1, "X": True, "RATIO": 0.5}}},
    {"nodes": [{**BASE["nodes"][0], "ssh": {"options": {"StrictHostKeyChecking": False, "ConnectTimeout": 5}}}]},
    {"nodes": [{**BASE["nodes"][0], "ssh": {"options": ["StrictHostKeyChecking=no", "ConnectTimeout=5"]}}]},
    {"server": {"args": {"enable-metrics": True, "log-level": "info", "cuda-graph-bs-decode": [1, 2, 4],
                         "disable-radix-cache": None, "max-running-requests": 64}}},
    {"decode": {"nodes": ["n0"], "port": 30200, "args": {"mem-fraction-static": 0.8}}},
    {"router": {"args": {"log-level": "debug", "retries": 3}}},
    {"router": {"metrics_port": 9464}},
    {"slurm": {"time_limit": 30, "sbatch_directives": {"mail-type": "END", "requeue": True, "hold": None},
               "srun_options": ["--cpu-bind=none"], "setup": "module load cuda"}},
    {"slurm": {"time_limit": "1-00:00:00", "sbatch_directives": ["--comment=x"], "setup": ["a", "b"]},
     "nodes": [{"name": "n0", "gpu": "h100", "gpus": 8}]},  # with slurm:, a node may leave host out
    {"engine": {"container": {"image": "lmsysorg/sglang:v0.5.4", "mounts": {"/a": "/b"}, "env": {"X": 1}}}},
    {"engine": {"container": {"image": "x", "mounts": ["/a:/b:ro"], "workdir": "/w", "docker_args": ["--x"]}}},
])
def test_loader_and_schema_accept_the_same_forms(over: dict) -> None:
    doc = {**BASE, **over}
    assert errors(VALIDATOR, doc) == []
    build_topology(doc, source="<forms>")


@pytest.mark.parametrize("over", [
    {"engine": {"env": {"X": None}}},
    {"engine": {"env": {"X": [1]}}},
    {"nodes": [{**BASE["nodes"][0], "ssh": {"options": ["no-equals-sign"]}}]},
    {"server": {"args": {"flag": {"nested": 1}}}},
    {"nodes": [{"name": "n0", "gpu": "h100", "gpus": 8}]},  # no host and no slurm: section
    {"slurm": {"sbatch_directives": {"x": [1]}}},
    {"engine": {"container": {"mounts": []}}},
])
def test_loader_and_schema_refuse_the_same_forms(over: dict) -> None:
    doc = {**BASE, **over}
    assert errors(VALIDATOR, doc) != []
    with pytest.raises(UserError):
        build_topology(doc, source="<forms>")
