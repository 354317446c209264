"""JSON Schema of the topology file format (`pdctl schema`), generated from the pydantic models.

Generated rather than hand-written so it can never drift from what the loader accepts; the post-processing
only makes role overrides honest (their default is whatever server: says, not a fixed value) and states the
rules pydantic cannot express per field: which role sections `mode` requires, and that nodes name their host
unless a slurm: or kubernetes: section assigns them (if/then/else under allOf).
"""

from __future__ import annotations

from typing import Any

from pdctl.topology.model import SERVER_KEYS, TopologyFile
from pdctl.topology.sections import MODE_SECTIONS

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"
ROLE_DEFS = {"prefill": "PrefillSpec", "decode": "DecodeSpec", "colocated": "ColocatedSpec"}
SCALAR = {"type": ["string", "number", "integer", "boolean"]}
OPTIONS = {"anyOf": [{"type": "array", "items": {"type": "string"}},
                     {"type": "object", "additionalProperties": {"anyOf": [SCALAR, {"type": "null"}]}}]}
# Forms the loader accepts before it normalises them (the models' field types show only the result).
ACCEPTED = {
    # engine.env: YAML reads `FOO: 1` as an int and `X: yes` as a bool; the loader keeps them as text
    ("EngineConfig", "env"): {"type": "object", "additionalProperties": SCALAR},
    # ssh.options: a mapping {K: V} or a list ["K=V", ...]
    ("SSHConfig", "options"): {"anyOf": [
        {"type": "object", "additionalProperties": SCALAR},
        {"type": "array", "items": {"type": "string", "pattern": "="}},
    ]},
    # args: flag -> a scalar, null (omitted) or a list of scalars (a flag with several values)
    ("ServerConfig", "args"): {"type": "object", "additionalProperties": {"anyOf": [
        SCALAR, {"type": "null"}, {"type": "array", "items": SCALAR}]}},
    # extra #SBATCH / srun options: a list of option strings or a mapping {option: value | true | null}
    ("SlurmConfig", "sbatch_directives"): OPTIONS,
    ("SlurmConfig", "srun_options"): OPTIONS,
    # setup: one string or a list of shell lines
    ("SlurmConfig", "setup"): {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]},
    # time_limit: Slurm's forms as text, or a number of minutes
    ("SlurmConfig", "time_limit"): {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 0},
                                              {"type": "null"}]},
    # container mounts: "SRC:DST[:ro]" strings, or a mapping {SRC: DST}
    ("ContainerConfig", "mounts"): {"anyOf": [{"type": "array", "items": {"type": "string"}},
                                              {"type": "object", "additionalProperties": {"type": "string"}}]},
    ("ContainerConfig", "env"): {"type": "object", "additionalProperties": SCALAR},
}


def _mode_rules() -> dict[str, Any]:
    """mode colocated -> colocated: required, prefill:/decode: absent; otherwise (pd) the reverse."""
    pd, colocated = MODE_SECTIONS["pd"], MODE_SECTIONS["colocated"]

    def forbid(sections: tuple[str, ...]) -> dict[str, Any]:
        return {"not": {"anyOf": [{"required": [s]} for s in sections]}}

    return {
        "if": {"properties": {"mode": {"const": "colocated"}}, "required": ["mode"]},
        "then": {"required": list(colocated), **forbid(pd)},
        "else": {"required": list(pd), **forbid(colocated)},
    }


def _host_rule() -> dict[str, Any]:
    """Without a slurm: or kubernetes: section every node names its host; with one, a node may leave it to
    the job (Slurm) or the scheduler (Kubernetes)."""
    return {
        "if": {"not": {"anyOf": [{"required": ["slurm"]}, {"required": ["kubernetes"]}]}},
        "then": {"properties": {"nodes": {"items": {"required": ["host"]}}}},
    }


def topology_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a topology file, with a description on every key."""
    schema = TopologyFile.model_json_schema(mode="validation")
    schema["$schema"] = SCHEMA_DIALECT
    schema["title"] = "pdctl topology"
    schema["description"] = (
        "One SGLang deployment (pdctl TOPOLOGY.md): prefill/decode disaggregated (mode: pd, the default) or "
        "plain non-PD servers (mode: colocated). Unknown keys are errors."
    )
    props = schema["properties"]
    for section, ref in ROLE_DEFS.items():
        # The role sections are Optional in the model only because `mode` decides which are required; as
        # written they are mappings (null is an error), so the schema says just that.
        description = props[section].get("description", "")
        props[section] = {"$ref": f"#/$defs/{ref}", "description": description}
    schema["allOf"] = [_mode_rules(), _host_rule()]
    defs = schema.get("$defs", {})
    for (model, field), accepted in ACCEPTED.items():
        targets = [model] if model != "ServerConfig" else [m for m in (model, *ROLE_DEFS.values(), "RouterConfig")]
        for name in targets:
            prop = defs.get(name, {}).get("properties", {}).get(field)
            if prop is not None:
                keep = {k: v for k, v in prop.items() if k in ("description", "title", "default")}
                prop.clear()
                prop.update({**accepted, **keep})
    for role_def in ROLE_DEFS.values():
        role_props = schema.get("$defs", {}).get(role_def, {}).get("properties", {})
        for key in SERVER_KEYS:
            if key in role_props:
                role_props[key].pop("default", None)
                base = role_props[key].get("description", "")
                role_props[key]["description"] = f"Overrides server.{key} for this role. {base}".strip()
    return schema
