"""Preflight at cluster scale on 8 namespaced hosts (tests/support/multihost.py), 4 prefill and 4 decode nodes,
reached over their sshds: the default transfer plan is 4 pairs in one round covering every node, every pair's KV
crosses the bridge and is verified, each host starts one transfer agent and one probe (counted on the hosts by
the engine interpreter itself), one ssh connection per host serves both, and progress is printed line by line
on a piped stderr. A deadline that expires names what was still running and fails the preflight.

Timing lives in benchmarks/bench_preflight.py (`make bench`), not here."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from tests.support.launch_e2e import pdctl
from tests.support.multihost import counting_python, scale_topology, start_multihost
from tests.support.netns import netns_missing_reason
from tests.support.sshd import sshd_missing_reason

_why = netns_missing_reason() or sshd_missing_reason()
pytestmark = [pytest.mark.e2e, pytest.mark.skipif(_why is not None, reason=str(_why))]
PREFILL, DECODE = "abcd", "efgh"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("preflight-scale")
    from pdctl.reference.checkpoint import init_checkpoint

    checkpoint = init_checkpoint(tmp / "models" / "reference-tiny", seed=0)
    mh = start_multihost(tmp, PREFILL + DECODE, sshd_log_level="INFO")
    try:
        python, starts = counting_python(mh, tmp)
        topo = scale_topology(mh, tmp, checkpoint, prefill=PREFILL, decode=DECODE, name="scale8", python=python)
        yield {"mh": mh, "tmp": tmp, "topo": topo, "starts": starts}
    finally:
        mh.stop()


def test_eight_hosts_one_round_of_four_pairs_one_agent_and_one_connection_per_host(cluster: dict) -> None:
    mh = cluster["mh"]
    logins = {x: mh.sshd[x].logins() for x in PREFILL + DECODE}
    cluster["starts"].write_text("")
    done = pdctl("preflight", str(cluster["topo"]), "--json", "-", "--tokens", "128", cwd=cluster["tmp"], timeout=600)
    doc = json.loads(done.stdout)
    assert done.returncode == 0 and doc["ok"], done.stderr[-4000:]
    nodes = [f"p{x}" for x in PREFILL] + [f"d{x}" for x in DECODE]
    plan = doc["transfer_plan"]
    pairs = [[f"p{p}", f"d{d}"] for p, d in zip(PREFILL, DECODE)]
    assert plan["mode"] == "cover" and plan["pairs"] == pairs and plan["rounds"] == [pairs]
    assert {link for _, _, link in plan["links"]} == {"cross-node"}
    assert sorted([t["from"], t["to"]] for t in doc["transfers"]) == pairs
    assert all(t["verified"] and t["crosses_nodes"] and t["transport"].startswith("tcp/pd0") for t in doc["transfers"])
    assert {n for t in doc["transfers"] for n in (t["from"], t["to"])} == set(nodes)  # every node covered

    hostname = {f"{'p' if x in PREFILL else 'd'}{x}": mh[x].hostname for x in PREFILL + DECODE}
    assert {n: a["hostname"] for n, a in doc["agents"].items()} == hostname
    starts = Counter(tuple(line.split(" ", 1)) for line in cluster["starts"].read_text().splitlines())
    assert starts == Counter({(h, w): 1 for h in hostname.values()
                              for w in ("-c", "-m pdctl.bench.transfer.agent")}), starts
    assert {x: mh.sshd[x].logins() - n for x, n in logins.items()} == dict.fromkeys(PREFILL + DECODE, 1)

    lines = [line for line in done.stderr.splitlines() if line.startswith("preflight: [")]
    assert sorted(line.split()[3].rstrip(":") for line in lines if " probed " in line) == sorted(nodes)
    finished = [line for line in lines if " transfer p" in line and "verified" in line]
    assert len(finished) == 4 and all(" left)" in line for line in finished), lines


def test_an_expired_deadline_names_what_still_ran_and_fails(cluster: dict) -> None:
    done = pdctl("preflight", str(cluster["topo"]), "--json", "-", "--tokens", "128", "--deadline", "1",
                 cwd=cluster["tmp"], timeout=600)
    doc = json.loads(done.stdout)
    assert done.returncode == 1 and not doc["ok"]
    assert doc["deadline"]["expired"] and doc["deadline"]["seconds"] == 1
    assert doc["deadline"]["still_running"], doc["deadline"]
    assert all(w.startswith(("probe of ", "transfer p")) for w in doc["deadline"]["still_running"])
    assert "deadline (1s) expired; still running:" in " ".join(done.stderr.split())
    uncovered = {n["node"] for n in doc["nodes"] for c in n["checks"]
                 if c["check"] == "transfer.coverage" and not c["ok"]}
    assert uncovered and uncovered <= {f"p{x}" for x in PREFILL} | {f"d{x}" for x in DECODE}


def test_an_unreached_node_is_a_coverage_failure_and_the_others_run_in_two_rounds(cluster: dict) -> None:
    """Host h's sshd is not where the topology says: it fails `reach` and `transfer.coverage` (never a silent
    gap), and the plan covers the 7 reached nodes: 4 prefill x 3 decode in 4 pairs, so one decode node takes
    two pairs, in two rounds."""
    import yaml

    doc = yaml.safe_load(cluster["topo"].read_text())
    node = next(n for n in doc["nodes"] if n["name"] == "dh")
    node["ssh"]["port"] = 2222  # nothing listens there on host h: connection refused
    topo = cluster["tmp"] / "scale8-unreached.yaml"
    topo.write_text(yaml.safe_dump(doc, sort_keys=False))
    done = pdctl("preflight", str(topo), "--json", "-", "--tokens", "128", cwd=cluster["tmp"], timeout=600)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and not report["ok"]
    failed = {(n["node"], c["check"]) for n in report["nodes"] for c in n["checks"]
              if not c["ok"] and c["severity"] == "error"}
    assert failed == {("dh", "reach"), ("dh", "transfer.coverage")}, failed
    plan = report["transfer_plan"]
    assert len(plan["pairs"]) == 4 and len(plan["rounds"]) == 2
    assert "dh" not in {n for pair in plan["pairs"] for n in pair}
    assert all(t["verified"] for t in report["transfers"]) and len(report["transfers"]) == 4
    assert set(report["agents"]) == {"pa", "pb", "pc", "pd", "de", "df", "dg"}


def test_nodes_without_pdctl_fail_their_pairs_and_the_coverage_of_both_nodes(cluster: dict) -> None:
    """Hosts a (prefill) and f (decode) run an engine environment without pdctl (a bare venv): their agents
    cannot start, so their pairs fail at once (a prefill side learns that its decode side is gone, no timeout;
    a pair given to a dead agent fails when its result is asked for), and both nodes of each such pair fail
    `transfer.coverage`; the other pairs still pass."""
    import subprocess
    import sys

    mh, tmp = cluster["mh"], cluster["tmp"]
    bare = tmp / "bare-env"
    if not bare.exists():
        subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True, timeout=120)
    for letter in "af":
        mh.use_env(letter, bare)
    try:
        done = pdctl("preflight", str(cluster["topo"]), "--json", "-", "--tokens", "128", cwd=tmp, timeout=600)
    finally:
        for letter in "af":
            mh.restore_env(letter)
    report = json.loads(done.stdout)
    assert done.returncode == 1 and not report["ok"]
    bad = sorted((t["from"], t["to"]) for t in report["transfers"] if not t["verified"])
    assert bad == [("pa", "de"), ("pb", "df")], report["transfers"]
    assert all("pdctl is not importable" in t["error"] for t in report["transfers"] if not t["verified"])
    uncovered = {n["node"] for n in report["nodes"] for c in n["checks"]
                 if c["check"] == "transfer.coverage" and not c["ok"]}
    assert uncovered == {"pa", "de", "pb", "df"}
    assert sum(t["verified"] for t in report["transfers"]) == 2
    assert report["agents"]["pa"] is None and report["agents"]["df"] is None
    assert not report["deadline"]["expired"]
