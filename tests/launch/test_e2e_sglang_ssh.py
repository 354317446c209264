"""`pdctl launch` of SGLang's REAL server over ssh: a colocated TP1 SGLang 0.5.23 server (CPU node) on namespaced
host a, the router on host c, each reached through its own sshd (tests/support/multihost.py). Host a's engine
environment is SGLang's side venv (bound at the engine path every host shares, as a node has its software at one
path), host c's is pdctl's (the router). One test, one server: launch, a routed greedy generate, status (healthy,
the KV pool SGLang reports against the render's), and `down`, after which nothing of the run's process groups is
left on host a (SGLang forks a scheduler and a detokenizer per server). It starts one server, not a PD pair
(~20-80 s, ~2 GiB); it is in conftest's "hosts" group, since it builds namespaced hosts."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from pdctl.render.cpu import MAX_TOTAL_TOKENS
from pdctl.sglang_cpu import SERVE_MODULE
from pdctl.sglang_cpu.sidevenv import init_model
from tests.support.launch_e2e import generate, pdctl
from tests.support.multihost import start_multihost
from tests.support.netns import netns_missing_reason
from tests.support.orphans import assert_no_orphans, group_pids, live_pids, started_records
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900), pytest.mark.skipif(_why is not None, reason=str(_why))]


def _netns_pids(netns: str) -> set[int]:
    out = subprocess.run(["ip", "netns", "pids", netns], capture_output=True, text=True, check=True).stdout
    return {int(p) for p in out.split()}


def _titles(pids: set[int]) -> list[bytes]:
    out = []
    for pid in pids:
        try:
            out.append(Path(f"/proc/{pid}/cmdline").read_bytes())
        except OSError:
            continue
    return out


def test_a_real_sglang_server_launched_over_ssh_serves_and_down_leaves_nothing(tmp_path: Path,
                                                                                sglang_python: str) -> None:
    env = {**os.environ, "PDCTL_SGLANG_PYTHON": sglang_python}
    model = init_model(str(tmp_path / "tiny-llama"), "llama", 0)
    mh = start_multihost(tmp_path, "ac")
    run_dir = tmp_path / "run"
    try:
        mh.use_env("a", Path(sglang_python).parents[1])  # host a's engine path holds SGLang's side venv
        doc = {"name": "sglang-ssh", "mode": "colocated",
               "engine": {"kind": "sglang", "version": "0.5.23", "python": mh.python},
               "model": {"path": model["path"]},
               "nodes": [mh.node("a", "sa", gpus=1), mh.node("c", "rc")],
               "server": {"page_size": 16},
               "colocated": {"nodes": ["sa"], "tp": 1, "port": 30000},
               "router": {"node": "rc", "host": "0.0.0.0", "port": 8000}}
        topo = tmp_path / "sglang-ssh.yaml"
        topo.write_text(yaml.safe_dump(doc, sort_keys=False))
        done = pdctl("launch", str(topo), "--detach", "--skip-preflight", "--run-dir", str(run_dir), "--timeout",
                     "600", "--json", "-", cwd=tmp_path, timeout=900, env=env)
        assert done.returncode == 0, done.stderr[-4000:]
        state = json.loads(done.stdout)
        server = next(r for r in started_records(run_dir) if r["role"] == "colocated")
        assert server["executor"] == "ssh" and server["host"] == mh["a"].address
        assert server["pid"] in _netns_pids(mh["a"].netns)  # it runs on host a, started through a's sshd
        cmd = Path(f"/proc/{server['pid']}/cmdline").read_bytes().split(b"\0")
        assert cmd[1:3] == [b"-m", SERVE_MODULE.encode()], cmd[:3]  # SGLang's launch_server, CPU adaptations
        groups = group_pids(started_records(run_dir))
        assert sum(b"sglang::scheduler" in t for t in _titles(groups)) == 1, _titles(groups)

        first = generate(state["router"]["url"], "Natalia sold clips to", max_new_tokens=8)["output_ids"]
        direct = generate(server["url"], "Natalia sold clips to", max_new_tokens=8)["output_ids"]
        assert len(first) == 8 and first == direct  # routed through host c to host a's real server

        status = pdctl("status", "--run-dir", str(run_dir), "--json", "-", cwd=tmp_path, timeout=180, env=env)
        assert status.returncode == 0, status.stderr[-3000:]
        row = json.loads(status.stdout)["processes"][0]
        assert row["state"] == "healthy" and row["executor"] == "ssh", row
        kv = row["kv_capacity"]
        assert (kv["max_total_num_tokens"], kv["estimate"], kv["verdict"]) == (MAX_TOTAL_TOKENS,) * 2 + ("agrees",)

        down = pdctl("down", "--run-dir", str(run_dir), cwd=tmp_path, timeout=180, env=env)
        assert down.returncode == 0, down.stderr[-3000:]
        assert_no_orphans(run_dir)
        assert not live_pids(groups) and not (groups & _netns_pids(mh["a"].netns)), live_pids(groups)
    finally:
        try:
            if (run_dir / "state.json").exists() and live_pids(group_pids(started_records(run_dir))):
                pdctl("down", "--run-dir", str(run_dir), cwd=tmp_path, timeout=180, env=env)
        finally:
            mh.stop()
