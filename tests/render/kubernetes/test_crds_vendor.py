"""scripts/kubernetes-crds/vendor.py regenerates the vendored CRD schemas: given the upstream CRD file of the
vendored release (rebuilt here from the vendored schema as an upstream CustomResourceDefinition with another,
older version beside it), it writes the same bytes and the same sources.json entry; a file that is not a CRD is
refused."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from pdctl.render.kubernetes.crds import sources
from tests.support.paths import REPO

SCRIPT = REPO / "scripts" / "kubernetes-crds" / "vendor.py"
CRDS = REPO / "pdctl" / "render" / "kubernetes" / "crds"


def upstream(flavor: str) -> dict:
    """The CRD document as its release ships it: the vendored version (served, storage) and an older one."""
    meta = sources()[flavor]
    kept = json.loads(gzip.decompress((CRDS / meta["file"]).read_bytes()))
    version = {"name": kept["version"], "served": True, "storage": True,
               "schema": {"openAPIV3Schema": kept["openAPIV3Schema"]}, "subresources": {"status": {}}}
    older = {"name": "v0alpha0", "served": False, "storage": False,
             "schema": {"openAPIV3Schema": {"type": "object"}}}
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": meta["crd"], "annotations": {"controller-gen.kubebuilder.io/version": "v0.16.5"}},
            "spec": {"group": kept["group"], "scope": kept["scope"],
                     "names": {"kind": kept["kind"], "plural": kept["plural"], "listKind": kept["kind"] + "List"},
                     "versions": [older, version]}}


def vendor(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args, "--out", str(tmp_path / "out")], cwd=REPO,
                          capture_output=True, text=True, timeout=300, check=False)


@pytest.mark.parametrize("flavor", ["lws", "rbg"])
def test_the_vendored_files_are_what_the_script_writes(tmp_path: Path, flavor: str) -> None:
    meta = sources()[flavor]
    crd = tmp_path / "crd.yaml"
    crd.write_text(yaml.safe_dump(upstream(flavor), sort_keys=False))
    done = vendor(tmp_path, flavor, meta["release"], "--file", str(crd), "--commit", meta["commit"])
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out" / meta["file"]).read_bytes() == (CRDS / meta["file"]).read_bytes()
    assert (tmp_path / "out" / "sources.json").read_text() == (CRDS / "sources.json").read_text()


def test_a_file_that_is_not_a_crd_is_refused(tmp_path: Path) -> None:
    other = tmp_path / "deploy.yaml"
    other.write_text(yaml.safe_dump({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "x"}}))
    done = vendor(tmp_path, "lws", "v0.10.0", "--file", str(other), "--commit", "0" * 40)
    assert done.returncode != 0 and "not a CustomResourceDefinition" in done.stderr
    assert not (tmp_path / "out").exists()
