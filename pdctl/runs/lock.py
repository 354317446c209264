"""`<run_dir>/lock.json`: what a run ran, to compare runs later (`pdctl diff`) and to cite from results.

Written by every launch that starts something (locally, or the Slurm job on its nodes; a submit writes it
first without node facts, the job rewrites it with them): pdctl's version; the topology after `--set`, the
sweep variant and the cluster profile's aliases (the document, and its sha256); the SGLang release asked for
(engine.version), the one that judged the commands and its flag table; per node what preflight saw (GPU model
and count, driver, CUDA, SGLang / NIXL / Mooncake / torch / router versions, `uname -m`), and every preflight
check that failed or warned (a node whose SGLang is not engine.version among them); container image and model
(path, revision, the directory that resolved to). srtctl keeps a similar record of its submissions.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from pdctl import __version__
from pdctl.jsonfiles import read_json_object
from pdctl.runs.state import write_whole

if TYPE_CHECKING:
    from pdctl.render.spec import Deployment

LOCK_FILE = "lock.json"
LOCK_VERSION = 1


def topology_document(topo: Any) -> dict[str, Any]:
    """The topology as launched: the document after overrides, variant and profile, else the file's."""
    if topo.document is not None:
        return topo.document
    if topo.source_path is not None:
        try:
            loaded = yaml.safe_load(Path(topo.source_path).read_text(encoding="utf-8"))
        except (OSError, yaml.YAMLError):
            loaded = None
        if isinstance(loaded, dict):
            return loaded
    # built from data (no file): the effective topology, defaults spelled out
    return topo.model_dump(mode="json", exclude={"source_path", "document", "overrides", "profile", "variant"})


def document_hash(doc: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()


def build_lock(deployment: Deployment, *, sglang: dict[str, Any] | None, nodes: dict[str, Any] | None,
               problems: list[dict[str, Any]] | None = None, preflight: str = "passed") -> dict[str, Any]:
    """The lock of DEPLOYMENT. SGLANG: the version choice (version, table, source, note); NODES: preflight's
    facts per node (None: not gathered, PREFLIGHT says why); PROBLEMS: preflight's failed or warned checks."""
    topo = deployment.topo
    document = topology_document(topo)
    container = topo.engine.container
    return {
        "lock_version": LOCK_VERSION,
        "written_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "pdctl": __version__,
        "topology": {"name": topo.name, "source": str(topo.source_path) if topo.source_path else None,
                     "sha256": document_hash(document), "overrides": list(topo.overrides),
                     "variant": topo.variant, "profile": topo.profile, "document": document},
        "engine": {"kind": topo.engine.kind, "version": topo.engine.version, "sglang": sglang,
                   "image": container.image if container is not None else None},
        "model": {"path": topo.model.path, "revision": topo.model.revision, "resolved": deployment.model_path},
        "executor": deployment.executor,
        "preflight": preflight,
        "nodes": nodes or {},
        "problems": problems or [],
    }


def write_lock(run_dir: Path, doc: dict[str, Any]) -> Path:
    """RUN_DIR/lock.json, all or nothing (a full filesystem: a UserError naming the file, nothing half-written)."""
    path = Path(run_dir) / LOCK_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    write_whole(path, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")
    return path


def read_lock(run_dir: Path) -> dict[str, Any]:
    """RUN_DIR's lock.json (UserError naming it when missing or unreadable)."""
    return read_json_object(Path(run_dir) / LOCK_FILE, "the run's lock",
                            missing_hint="runs launched before lock.json existed have none")


def lock_pointer(run_dir: Path | None) -> dict[str, Any] | None:
    """What a result document cites: the run's lock.json and its topology hash (None without a lock)."""
    if run_dir is None:
        return None
    path = Path(run_dir) / LOCK_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {"path": str(path.resolve()), "topology_sha256": (doc.get("topology") or {}).get("sha256"),
            "pdctl": doc.get("pdctl"), "sglang": (doc.get("engine") or {}).get("version")}
