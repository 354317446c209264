"""Where parity learns each server's attention TP (pdctl/parity/splits.py), on captured router answers: a
regular sglang-router's workers (their `metadata` as the router read it: strings), a PD router's workers, a run's
topology, a plain server. No server answers here (the URLs are free ports: every /server_info is refused), so
each TP comes from the source under test; the live path is test_parity_floor.py's."""

from __future__ import annotations

import json
from pathlib import Path

from pdctl.parity.controls import tp_controls
from pdctl.parity.splits import Split, attention_tp, discover_split, metadata_tp
from pdctl.runs.state import STATE_FILE, TOPOLOGY_COPY
from pdctl.target import Target, discover_workers, target_from_run_dir, target_from_url
from tests.support.net import free_port
from tests.support.paths import REPO

CAPTURED = REPO / "tests" / "data" / "router-0.3.2-workers.json"


def _url() -> str:
    return f"http://127.0.0.1:{free_port()}"  # nothing listens there


def _captured() -> dict:
    return json.loads(CAPTURED.read_text())


def test_a_regular_router_lists_its_plain_servers_with_their_tp_as_strings() -> None:
    doc = _captured()["regular"]  # GET /workers of sglang-router 0.3.2 --worker-urls (one TP2 server)
    workers = discover_workers(doc)
    assert workers.prefill == workers.decode == [] and len(workers.regular) == 1
    meta = workers.metadata[workers.regular[0]]
    assert isinstance(meta["tp_size"], str) and metadata_tp(meta) == 2
    target = target_from_url("http://router:1", workers=workers)
    assert target.colocated_urls == workers.regular and target.cold_flush_urls == workers.regular
    assert target.info_url == workers.regular[0]  # server facts from the server, not the router
    assert attention_tp(_captured()["regular_get_server_info"]) is None  # the router's own answer: counts only


def test_a_pd_router_lists_prefill_and_decode() -> None:
    doc = _captured()["pd"]  # sglang-router 0.3.2 --pd-disaggregation, prefill TP1 -> TP2
    for worker in doc["workers"]:
        worker["url"] = _url()  # the captured ports may be anyone's now: nothing must answer there
    workers = discover_workers(doc)
    assert len(workers.prefill) == len(workers.decode) == 1 and workers.regular == []
    target = target_from_url("http://router:1", decode_urls=tuple(workers.decode), prefill_urls=tuple(workers.prefill),
                             workers=workers)
    found = discover_split(target)  # nothing answers at those URLs: the TPs are the router's word
    assert found.split == Split(1, 2) and {s["source"] for s in found.servers} == {"router /workers metadata"}
    assert discover_workers(None) == discover_workers({"error": "not a router"}) == discover_workers({})


def test_metadata_and_server_info_give_the_attention_tp() -> None:
    assert metadata_tp({"tp_size": "4", "dp_size": "1"}) == 4 and metadata_tp({"tp_size": "2"}) == 2
    assert metadata_tp({"tp_size": "8", "dp_size": "4"}) is None  # DP attention or not: the router does not say
    assert metadata_tp({"tp_size": "x"}) is None and metadata_tp({"tp_size": True}) is None and metadata_tp(None) is None
    assert attention_tp({"tp_size": 8, "dp_size": 4, "enable_dp_attention": True}) == 2
    assert attention_tp({"tp_size": "2"}) == 2 and attention_tp({"prefill": [{"tp_size": 2}]}) == 2
    assert attention_tp({}) is None and attention_tp(None) is None


def test_each_server_of_a_router_gets_its_tp_from_what_the_router_read() -> None:
    worker = _url()
    regular = discover_split(Target(url=_url(), colocated_urls=[worker], worker_meta={worker: {"tp_size": "2"}}))
    assert regular.split == Split(2, 2) and not regular.unknown_because
    assert regular.servers == [{"url": worker, "role": "colocated", "tp": 2, "source": "router /workers metadata"}]
    prefill, decode = _url(), _url()
    pd = discover_split(Target(url=_url(), prefill_urls=[prefill], flush_decode=[decode],
                               worker_meta={prefill: {"tp_size": "1"}, decode: {"tp_size": "2", "dp_size": "1"}}))
    assert pd.split == Split(1, 2) and not pd.unknown_because


def test_a_split_that_cannot_be_learned_says_why() -> None:
    router = _url()
    bare = discover_split(Target(url=router))  # a URL that tells nothing: no /server_info, no workers, no run
    assert bare.split == Split(None, None) and router in bare.unknown_because
    a, b = _url(), _url()
    mixed = discover_split(Target(url=_url(), colocated_urls=[a, b],
                                  worker_meta={a: {"tp_size": "1"}, b: {"tp_size": "2"}}))
    assert not mixed.split.known and "different TPs (1, 2)" in mixed.unknown_because
    dp = discover_split(Target(url=_url(), colocated_urls=[a], worker_meta={a: {"tp_size": "8", "dp_size": "4"}}))
    assert not dp.split.known


def test_a_run_dir_gives_the_tp_of_its_roles_from_its_topology(tmp_path: Path) -> None:
    """configs/local-cpu.yaml: prefill TP2 -> decode TP1; the servers do not answer, the run's records do."""
    (tmp_path / TOPOLOGY_COPY).write_text((REPO / "configs" / "local-cpu.yaml").read_text())
    state = {"processes": [{"role": "prefill", "url": _url()}, {"role": "decode", "url": _url()}],
             "router": {"url": _url()}}
    (tmp_path / STATE_FILE).write_text(json.dumps(state))
    found = discover_split(target_from_run_dir(tmp_path))
    assert found.split == Split(2, 1) and {s["source"] for s in found.servers} == {"run topology"}


def test_a_needed_control_that_cannot_be_had_leaves_the_floor_uncalibrated() -> None:
    """Splits known and different, no control (disabled): not calibrated, and it says which TP would calibrate
    it; splits unknown: not calibrated either; the same split: calibrated without a control."""
    p, d, ref = _url(), _url(), _url()
    candidate = Target(url=_url(), prefill_urls=[p], flush_decode=[d],
                       worker_meta={p: {"tp_size": "1"}, d: {"tp_size": "2"}})
    reference = Target(url=_url(), colocated_urls=[ref], worker_meta={ref: {"tp_size": "1"}})
    with tp_controls(candidate, reference, enabled=False) as (controls, info):
        assert controls == [] and info.needed == [2] and info.missing == [2] and not info.calibrated
        assert "attention TP 2" in info.calibrate_with() and "--tp-control URL" in info.calibrate_with()
        assert info.document()["calibrated"] is False
    with tp_controls(candidate, Target(url=_url())) as (controls, info):
        assert controls == [] and not info.calibrated and "reference" in info.unknown
        assert "--reference-topology" in info.calibrate_with()
    with tp_controls(candidate, candidate) as (controls, info):
        assert controls == [] and info.calibrated and info.needed == []
