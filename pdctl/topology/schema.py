"""JSON Schema of the topology file format (`pdctl schema`), generated from the pydantic models.

Generated rather than hand-written so it can never drift from what the loader accepts; the post-processing
only makes role overrides honest (their default is whatever server: says, not a fixed value).
"""

from __future__ import annotations

from typing import Any

from pdctl.topology.model import SERVER_KEYS, TopologyFile

SCHEMA_DIALECT = "https://json-schema.org/draft/2020-12/schema"


def topology_json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a topology file, with a description on every key."""
    schema = TopologyFile.model_json_schema(mode="validation")
    schema["$schema"] = SCHEMA_DIALECT
    schema["title"] = "pdctl topology"
    schema["description"] = (
        "One prefill/decode disaggregated SGLang deployment (pdctl TOPOLOGY.md). Unknown keys are errors."
    )
    for role_def in ("PrefillSpec", "DecodeSpec"):
        props = schema.get("$defs", {}).get(role_def, {}).get("properties", {})
        for key in SERVER_KEYS:
            if key in props:
                props[key].pop("default", None)
                base = props[key].get("description", "")
                props[key]["description"] = f"Overrides server.{key} for this role. {base}".strip()
    return schema
