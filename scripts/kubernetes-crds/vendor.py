"""Regenerate pdctl's vendored CRD schemas (pdctl/render/kubernetes/crds/) from an upstream release's CRD file.

    .venv/bin/python scripts/kubernetes-crds/vendor.py lws v0.10.0          # kubernetes-sigs/lws
    .venv/bin/python scripts/kubernetes-crds/vendor.py rbg v0.7.0           # sgl-project/rbg
    .venv/bin/python scripts/kubernetes-crds/vendor.py lws v0.10.0 --file leaderworkersets.yaml --commit SHA

FLAVOR names an entry of crds/sources.json, whose `source` URL says the repository and the CRD's path in it
(https://github.com/OWNER/REPO/blob/RELEASE/PATH); RELEASE replaces the release in it. The CRD is downloaded
from raw.githubusercontent.com at that tag (or read from --file, e.g. on a machine without GitHub), and the
tag's commit asked from the GitHub API (or given with --commit). Of the CRD's versions the one sources.json
renders today is kept when the release still serves it, else the storage version (--version chooses).

Written: crds/<flavor>-<release>-<version>.json.gz ({group, kind, plural, scope, version, openAPIV3Schema} as
compact JSON with sorted keys, gzip without a timestamp: the same input gives the same bytes) and the flavor's
entry of sources.json; the previous file of that flavor is removed. Review the diff, then run
tests/render/kubernetes (strict validation of the renders against the new schema). --out DIR writes to
another directory (tests/render/kubernetes/test_crds_vendor.py regenerates the vendored files there).
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import re
import sys
import urllib.request
from pathlib import Path
from typing import Any

import yaml

CRDS = Path(__file__).resolve().parents[2] / "pdctl" / "render" / "kubernetes" / "crds"
SOURCE = re.compile(r"^https://github\.com/(?P<repo>[^/]+/[^/]+)/blob/(?P<release>[^/]+)/(?P<path>.+)$")
TIMEOUT_S = 60


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as response:  # fixed https URLs (GitHub)
        return response.read()


def pick_version(crd: dict[str, Any], wanted: str | None) -> dict[str, Any]:
    """The entry of CRD's spec.versions named WANTED (when served), else the storage version."""
    versions = crd["spec"]["versions"]
    chosen = next((v for v in versions if v["name"] == wanted and v.get("served", True)), None)
    chosen = chosen or next((v for v in versions if v.get("storage")), None)
    if chosen is None:
        raise SystemExit(f"{crd['metadata']['name']}: no version {wanted!r} and no storage version")
    return chosen


def vendored(crd: dict[str, Any], version: dict[str, Any]) -> dict[str, Any]:
    """What pdctl keeps of CRD at VERSION."""
    spec = crd["spec"]
    return {"group": spec["group"], "kind": spec["names"]["kind"], "plural": spec["names"]["plural"],
            "scope": spec["scope"], "version": version["name"], "openAPIV3Schema": version["schema"]["openAPIV3Schema"]}


def gzipped(doc: dict[str, Any], name: str) -> bytes:
    """DOC as compact sorted JSON, gzipped deterministically (no timestamp; NAME as the member's name)."""
    raw = json.dumps(doc, sort_keys=True, separators=(",", ":")).encode()
    buf = io.BytesIO()
    with gzip.GzipFile(filename=name, mode="wb", fileobj=buf, compresslevel=9, mtime=0) as out:
        out.write(raw)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("flavor", help="an entry of crds/sources.json (lws, rbg)")
    parser.add_argument("release", help="the upstream release tag, e.g. v0.10.0")
    parser.add_argument("--file", type=Path, help="the CRD YAML, already downloaded (default: fetch it)")
    parser.add_argument("--commit", help="the release's commit (default: asked from the GitHub API)")
    parser.add_argument("--version", help="the CRD version to keep (default: today's, else the storage one)")
    parser.add_argument("--out", type=Path, default=CRDS, help="where to write (default: the vendored directory)")
    args = parser.parse_args(argv)

    sources = json.loads((CRDS / "sources.json").read_text())
    if args.flavor not in sources:
        parser.error(f"unknown flavor {args.flavor!r}: expected one of {', '.join(sources)}")
    entry = sources[args.flavor]
    where = SOURCE.match(entry["source"])
    if where is None:
        parser.error(f"sources.json: {entry['source']!r} is not a github.com blob URL")
    repo, path = where["repo"], where["path"]
    text = args.file.read_bytes() if args.file else _get(f"https://raw.githubusercontent.com/{repo}/{args.release}/{path}")
    commit = args.commit or json.loads(_get(f"https://api.github.com/repos/{repo}/commits/{args.release}"))["sha"]
    crd = yaml.safe_load(text)
    if crd.get("kind") != "CustomResourceDefinition":
        raise SystemExit(f"{args.file or path}: not a CustomResourceDefinition")
    version = pick_version(crd, args.version or entry["apiVersion"].rsplit("/", 1)[-1])
    doc = vendored(crd, version)
    name = f"{args.flavor}-{args.release}-{doc['version']}.json"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{name}.gz").write_bytes(gzipped(doc, name))
    if args.out == CRDS and entry["file"] != f"{name}.gz":
        (CRDS / entry["file"]).unlink(missing_ok=True)
    sources[args.flavor] = {
        "apiVersion": f"{doc['group']}/{doc['version']}", "commit": commit, "crd": crd["metadata"]["name"],
        "file": f"{name}.gz", "kind": doc["kind"], "plural": doc["plural"], "release": args.release,
        "source": f"https://github.com/{repo}/blob/{args.release}/{path}"}
    (args.out / "sources.json").write_text(json.dumps(sources, indent=2, sort_keys=True) + "\n")
    print(f"{args.flavor}: {doc['kind']} {doc['group']}/{doc['version']} from {repo}@{args.release} ({commit}) -> "
          f"{args.out / (name + '.gz')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
