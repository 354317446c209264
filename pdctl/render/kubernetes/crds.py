"""The custom resources pdctl renders (LeaderWorkerSet, RoleBasedGroup): their CRDs' openAPIV3Schema,
vendored with the release and source they came from (crds/sources.json), as a JSON Schema that rejects
unknown fields the way an API server with strict field validation does.

The API server prunes unknown fields of a structural schema, or with `fieldValidation=Strict` (kubectl's
default since 1.27) rejects them; a schema says where unknown fields are allowed with
`x-kubernetes-preserve-unknown-fields`. strict_schema() turns that into JSON Schema: every object with
`properties` and no such marker gets `additionalProperties: false`; `x-kubernetes-int-or-string` becomes
integer-or-string; `nullable` admits null. CEL rules (`x-kubernetes-validations`) are not evaluated here.
Regenerate the files with scripts/kubernetes-crds/vendor.py (from the release's CRD file; it writes the same bytes
for the same input: tests/render/kubernetes/test_crds_vendor.py).
"""

from __future__ import annotations

import gzip
import json
from functools import cache
from importlib import resources
from typing import Any

PACKAGE = "pdctl.render.kubernetes"


@cache
def sources() -> dict[str, dict[str, str]]:
    """flavor -> {apiVersion, kind, plural, release, commit, source, file}."""
    text = resources.files(PACKAGE).joinpath("crds/sources.json").read_text()
    return json.loads(text)


def api_version(flavor: str) -> str:
    """The apiVersion pdctl renders for FLAVOR's workload (the vendored CRD's served storage version)."""
    return sources()[flavor]["apiVersion"]


def by_kind(kind: str) -> str | None:
    """The flavor whose CRD defines KIND (None: a built-in kind)."""
    return next((flavor for flavor, s in sources().items() if s["kind"] == kind), None)


@cache
def crd_schema(flavor: str) -> dict[str, Any]:
    """The vendored openAPIV3Schema of FLAVOR's CRD (as the CRD states it)."""
    name = sources()[flavor]["file"]
    data = resources.files(PACKAGE).joinpath(f"crds/{name}").read_bytes()
    return json.loads(gzip.decompress(data))["openAPIV3Schema"]


def strict_schema(node: Any) -> Any:
    """NODE (an openAPIV3Schema) as a JSON Schema with the API server's strict field validation."""
    if isinstance(node, list):
        return [strict_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {k: strict_schema(v) for k, v in node.items() if not k.startswith("x-kubernetes-") and k != "nullable"}
    if node.get("x-kubernetes-int-or-string"):
        out.pop("type", None)
        out.setdefault("anyOf", [{"type": "integer"}, {"type": "string"}])
    preserve = node.get("x-kubernetes-preserve-unknown-fields")
    if node.get("type") == "object" and "properties" in node and not preserve and "additionalProperties" not in node:
        out["additionalProperties"] = False
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"] if isinstance(out["type"], str) else [*out["type"], "null"]
    return out


@cache
def validator(flavor: str) -> Any:
    """A jsonschema validator of FLAVOR's objects (jsonschema: a dependency of kubernetes-validate)."""
    import jsonschema

    schema = strict_schema(crd_schema(flavor))
    return jsonschema.Draft202012Validator(schema)
