"""Validation of rendered manifests without a cluster: what an API server with strict field validation
would reject.

- Built-in kinds (Service, Deployment): Kubernetes' own OpenAPI schemas, strict (unknown fields rejected),
  through kubernetes-validate (PyPI; the schemas ship in the package, no cluster or network needed).
- LeaderWorkerSet / RoleBasedGroup: their CRDs' vendored openAPIV3Schema, strict (pdctl.render.kubernetes.crds);
  and every pod template they embed as a Kubernetes PodTemplate, so that a container field is held to
  Kubernetes' schema even where the CRD leaves a patch free-form.
Not covered: admission webhooks, CEL rules (x-kubernetes-validations), and what only a scheduler or a
kubelet finds (resources no node has, an image that does not exist).
"""

from __future__ import annotations

from typing import Any

from pdctl.render.kubernetes.crds import by_kind, validator

# Kubernetes minor release whose schemas judge built-in kinds (kubernetes-validate picks the newest schema
# not newer than this).
KUBERNETES_VERSION = "1.33"


def _where(obj: dict[str, Any]) -> str:
    return f"{obj.get('kind', '?')} {obj.get('metadata', {}).get('name', '?')}"


def _builtin(obj: dict[str, Any], version: str) -> list[str]:
    import kubernetes_validate

    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.absolute_path)  # the first problem (kubernetes-validate stops there)
        return [f"{_where(obj)}: {path or '(top)'}: {exc.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"{_where(obj)}: Kubernetes {version} has no {obj.get('apiVersion')} {obj.get('kind')}"]
    return []


def pod_templates(node: Any, path: str = "") -> list[tuple[str, dict[str, Any]]]:
    """(path, template) for every pod template embedded in NODE: a mapping with `spec.containers`."""
    found: list[tuple[str, dict[str, Any]]] = []
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list) and "metadata" in node:
            found.append((path, node))
        for key, value in node.items():
            found += pod_templates(value, f"{path}.{key}" if path else key)
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += pod_templates(value, f"{path}[{i}]")
    return found


def validate_manifest(obj: dict[str, Any], version: str = KUBERNETES_VERSION) -> list[str]:
    """Problems with one object ([] = an API server would accept it, as far as schemas tell)."""
    flavor = by_kind(str(obj.get("kind")))
    if flavor is None:
        return _builtin(obj, version)
    problems = []
    for err in sorted(validator(flavor).iter_errors(obj), key=lambda e: list(e.absolute_path)):
        path = ".".join(str(p) for p in err.absolute_path)
        problems.append(f"{_where(obj)}: {path or '(top)'}: {err.message}")
    for path, tpl in pod_templates(obj.get("spec", {}), "spec"):
        wrapped = {"apiVersion": "v1", "kind": "PodTemplate", "metadata": {"name": "t"}, "template": tpl}
        problems += [p.replace("PodTemplate t: template", f"{_where(obj)}: {path}")
                     for p in _builtin(wrapped, version)]
    return problems


def validate_manifests(objs: list[dict[str, Any]], version: str = KUBERNETES_VERSION) -> list[str]:
    """Problems with every object, in order."""
    return [p for obj in objs for p in validate_manifest(obj, version)]
