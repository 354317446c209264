"""`pdctl launch --dry-run` of a topology whose nodes are other machines, as the user runs it (issue 20 item 5):
every process on a node runs that node's interpreter (engine.python), the router included, never the
submitting machine's venv python."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import yaml

from tests.support.launch_e2e import pdctl
from tests.support.topo_factory import BASE, merge


def test_a_remote_dry_run_runs_each_node_s_interpreter(tmp_path: Path) -> None:
    doc = merge(BASE, {"engine": {"python": "python3"},
                       "nodes": [{"name": "p0", "host": "10.1.0.1", "gpu": "h100", "gpus": 8},
                                 {"name": "d0", "host": "10.1.0.2", "gpu": "h100", "gpus": 8}],
                       "decode": {"tp": 8}, "router": {"node": "p0"}})
    path = tmp_path / "remote.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    done = pdctl("launch", str(path), "--dry-run", "--run-dir", str(tmp_path / "run"), "--json", "-", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    argv0 = {p["name"]: p["argv"][0] for p in [*plan["processes"], plan["router"]]}
    assert set(argv0) == {"prefill-0", "decode-0", "router"} and set(argv0.values()) == {"python3"}, argv0
    assert sys.executable not in done.stdout  # nowhere in the commands shown
