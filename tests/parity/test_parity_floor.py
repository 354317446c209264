"""Parity against a measured noise floor, for real, under `--numerics gpu-like` (issue 21):

- clean PD candidates — prefill TP1 -> decode TP2 and TP2 -> TP1, over NIXL and over Mooncake — pass against
  BOTH a PD full-cache reference of the same split and a colocated TP1 reference (whose floor then holds a
  TP2 control: TP rounding is measured, not blamed on the transfer);
- a decode that computes on corrupted KV (the reference engine's test hook: swapped heads, pages one off,
  stale sliding-window pages, a zeroed layer, fp8-rounded KV, fp8 only past position 256) fails against both;
- `--soak` catches a corruption that starts only after K served requests;
- issue 35: given URLs only, as the CLI is — the colocated reference and the TP2 control behind real regular-mode
  sglang-routers, the candidates behind their PD routers — every TP split is found, clean candidates pass,
  corruptions fail, and a reference whose split cannot be learned gives NOT CALIBRATED (exit 3), never FAILED.

One fleet for the module (every server started at once): a colocated TP1 reference and a colocated TP2 control,
two PD full-cache references and four candidates (and a regular router in front of each colocated server); the NIXL candidates' decodes have the hook armed (spec
"none" until a test switches it, and back after), the Mooncake ones have no hook at all. Each reference's
side — its cold answers and every mode's floor — is measured once (`measure_baseline`) and judges every
candidate (`run_parity(..., baseline=)`), exactly as one CLI run judges its one candidate. False-alarm and
detection rates over repeated runs: benchmarks/bench_parity_floor.py.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import requests

from pdctl.parity.controls import needed_tps
from pdctl.parity.results import ParityResult
from pdctl.parity.session import ParityRequest
from pdctl.parity.splits import Split, control_tp, discover_split, metadata_tp
from pdctl.target import resolve
from tests.support.flaky_proxy import Faults, FlakyProxy
from tests.support.parity_fleet import SPLITS, start_fleet

# the first judgement against each reference also measures its baseline (its cold answers, every floor): minutes
# on a loaded 2-core machine, above the suite's 300 s default; every request has its own timeout (parity.client)
pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]
MAX_PROMPT_TOKENS = 300  # page/window/chunk edges, past four windows (145) and past position 256
CORRUPTIONS = ("swap-heads", "page-shift", "stale-swa", "zero-layer", "fp8", "fp8,from=256")


@pytest.fixture(scope="module")
def fleet(ref_checkpoint, tmp_path_factory):
    with start_fleet(ref_checkpoint, tmp_path_factory.mktemp("floor"), max_prompt_tokens=MAX_PROMPT_TOKENS) as fleet:
        yield fleet


def _numbers(result: ParityResult) -> dict[str, str]:
    return {name: f"{mode.numbers()['worst']:.3g}/{mode.floor.level:.3g}" for name, mode in result.modes.items()}


def test_the_tp_split_is_found_whatever_fronts_the_servers(fleet) -> None:
    """Issue 35: PD routers (their prefill and decode workers), a regular router in front of the colocated TP1
    reference and one in front of the TP2 control (their plain workers, and what the router itself read of them:
    `metadata` with TP as a string), each resolved from its URL alone as the CLI resolves it."""
    for split, (p, d) in SPLITS.items():
        cand = discover_split(fleet.target(f"{split}-nixl"))
        assert cand.split == Split(p, d) and {s["source"] for s in cand.servers} == {"/server_info"}
        assert needed_tps(cand.split, discover_split(fleet.references["colocated"]).split) == [2]
        assert needed_tps(cand.split, discover_split(fleet.references[f"pd-{split}"]).split) == []
    behind = resolve(fleet.routers["colocated"], None, what="reference")
    assert behind.colocated_urls == [fleet.colocated.url] and behind.info_url == fleet.colocated.url
    found = discover_split(behind)
    assert found.split == Split(1, 1) and found.info["engine"] == "pdctl-reference", found.servers
    assert metadata_tp(behind.worker_meta[fleet.colocated.url]) == 1  # the router's own word, without /server_info
    assert control_tp(fleet.routers["tp2"])[0] == 2


def test_the_hook_is_armed_only_where_asked(fleet) -> None:
    armed, plain = fleet.pd["p2d1-nixl"], fleet.pd["p2d1-mooncake"]
    assert requests.get(armed.decode_url + "/server_info", timeout=10).json()["test_hook_corrupt_kv"] == "none"
    assert requests.get(armed.decode_url + "/test_hook/corrupt_kv", timeout=10).status_code == 200
    assert requests.get(plain.decode_url + "/server_info", timeout=10).json()["test_hook_corrupt_kv"] is None
    assert requests.get(plain.decode_url + "/test_hook/corrupt_kv", timeout=10).status_code == 404
    bad = requests.post(armed.decode_url + "/test_hook/corrupt_kv", json={"spec": "melt"}, timeout=10)
    assert bad.status_code == 400 and "unknown corruption" in bad.text


@pytest.mark.parametrize("reference", ["colocated", "pd-same-split"])
@pytest.mark.parametrize("candidate", ["p1d2-nixl", "p2d1-nixl", "p1d2-mooncake", "p2d1-mooncake"])
def test_clean_candidates_pass_against_both_references(fleet, candidate, reference, capsys) -> None:
    """NIXL candidates in every mode; Mooncake ones cold + concurrent (warm's prefix reuse is prefill's, the same
    code whatever moves the KV)."""
    ref = f"pd-{candidate.split('-')[0]}" if reference == "pd-same-split" else reference
    modes = ("cold", "warm", "concurrent") if candidate.endswith("nixl") else ("cold", "concurrent")
    result = fleet.judge(candidate, ref, modes=modes)
    doc = result.document()
    assert result.ok, ({m: d["failures"] for m, d in doc["modes"].items()}, fleet.pd[candidate].log_tails())
    for name, mode in result.modes.items():
        assert mode.floor is not None and all(c.explained_by == "floor" for c in mode.failures), name
        assert not any(c.hard_failure for c in mode.comparisons), name
    if "warm" in modes:
        assert max(doc["modes"]["warm"]["cached_tokens"]) >= 48  # warm really reused prefill's prefix
    assert doc["positions"]["first_divergent_position"] is None and doc["positions"]["covered_up_to"] >= 300
    if ref == "colocated":  # against TP1 the candidate differs (TP rounding), within what the TP2 control shows
        assert result.modes["cold"].floor.controls == ["tp2 control"] and result.modes["cold"].floor.level > 0
    with capsys.disabled():
        print(f"\n{candidate} vs {ref}: worst/floor {_numbers(result)}, margin {result.margin}")


@pytest.fixture()
def hooked(fleet):
    names = []

    def arm(candidate: str, spec: str) -> None:
        names.append(candidate)
        fleet.corrupt(candidate, spec)

    yield arm
    for name in names:
        fleet.corrupt(name, "none")


@pytest.mark.parametrize("reference", ["colocated", "pd-same-split"])
@pytest.mark.parametrize("spec", CORRUPTIONS)
def test_a_decode_on_corrupted_kv_fails_against_both_references(fleet, hooked, spec, reference, capsys) -> None:
    ref = "pd-p2d1" if reference == "pd-same-split" else reference
    hooked("p2d1-nixl", spec)
    result = fleet.judge("p2d1-nixl", ref, modes=("cold",))
    cold = result.modes["cold"]
    assert not result.ok and cold.unexplained, spec
    assert all(c.explained_by is None and not c.hard_failure for c in cold.unexplained)
    if ref == "pd-p2d1":  # same split: the prompt's logits (computed before the transfer) are identical
        assert all(not c.prefill_differs for c in cold.comparisons)
    positions = result.positions
    if spec.endswith("from=256"):  # only prompts that reach position 256 diverge, and the report says where
        assert {c.prompt_tokens for c in cold.unexplained} == {300}
        assert positions["first_divergent_position"] >= 256 and positions["longest_clean_prompt_below"] >= 145
    with capsys.disabled():
        print(f"\n[{spec}] vs {ref}: worst/floor {_numbers(result)}, margin {result.margin}, onset "
              f"{positions['first_divergent_position']}")


def test_a_corrupted_tp1_to_tp2_decode_fails_too(fleet, hooked) -> None:
    hooked("p1d2-nixl", "swap-heads")
    for ref in ("colocated", "pd-p1d2"):
        result = fleet.judge("p1d2-nixl", ref, modes=("cold",))
        assert not result.ok and result.modes["cold"].unexplained, ref


def test_soak_catches_a_corruption_that_starts_after_k_requests(fleet, hooked, capsys) -> None:
    per_round = len(fleet.prompts) * fleet.opts.copies  # requests per round, plus a resend per flip
    hooked("p1d2-nixl", f"zero-layer,after={2 * per_round}")  # intact for (at least) the whole first round
    result = fleet.judge("p1d2-nixl", "colocated", modes=(), soak_rounds=4)
    soak = result.soak
    assert not result.ok and not soak.ok
    assert soak.rounds[0].unexplained == 0 and soak.first_bad_round in (2, 3), soak.document()
    bad = soak.rounds[soak.first_bad_round - 1]
    assert f"round {bad.index} (after {bad.served_before} requests)" in soak.reason()
    assert all(r.unexplained for r in soak.rounds[soak.first_bad_round - 1:])  # and it stays broken
    with capsys.disabled():
        print("\nsoak rounds (mean, worst, unexplained):",
              [(round(r.mean, 4), round(r.worst, 4), r.unexplained) for r in soak.rounds])


def test_a_clean_soak_passes(fleet) -> None:
    result = fleet.judge("p2d1-mooncake", "pd-p2d1", modes=(), soak_rounds=2)
    assert result.ok and result.soak.ok, result.soak.document()
    assert result.soak.rounds[0].served_before == 0 and len(result.soak.rounds) == 2


@pytest.mark.parametrize("split", list(SPLITS))
def test_a_reference_behind_a_router_judges_clean_candidates_ok(fleet, split, capsys) -> None:
    """Issue 35's scenario, given only URLs: the PD router, the colocated reference's router and the TP2 control's
    router (`--tp-control`); every TP found behind them, the floor calibrated, PARITY OK cold and warm."""
    req = ParityRequest(candidate_url=fleet.pd[f"{split}-nixl"].router_url, reference_url=fleet.routers["colocated"],
                        tp_control_urls=(fleet.routers["tp2"],), modes=("cold", "warm"))
    result = fleet.run(req)
    doc = result.document()
    assert result.verdict == "OK", ({m: d["failures"] for m, d in doc["modes"].items()}, doc["tp"])
    assert doc["tp"]["candidate"] == list(SPLITS[split]) and doc["tp"]["reference"] == [1, 1]
    assert doc["tp"]["controls"] == [{"tp": 2, "url": fleet.routers["tp2"], "source": "given"}]
    assert doc["tp"]["calibrated"] and doc["calibration"]["calibrated"]
    assert result.modes["cold"].floor.controls == ["tp2 control"] and result.modes["cold"].floor.level > 0
    assert max(doc["modes"]["warm"]["cached_tokens"]) >= 48
    with capsys.disabled():
        print(f"\n{split} vs the colocated router: worst/floor {_numbers(result)}, margin {result.margin}")


@pytest.mark.parametrize("spec", ["swap-heads", "fp8,from=256"])
def test_a_reference_behind_a_router_still_catches_corruption(fleet, hooked, spec) -> None:
    hooked("p2d1-nixl", spec)
    req = ParityRequest(candidate_url=fleet.pd["p2d1-nixl"].router_url, reference_url=fleet.routers["colocated"],
                        tp_control_urls=(fleet.routers["tp2"],), modes=("cold",))
    result = fleet.run(req)
    assert result.verdict == "FAILED" and result.modes["cold"].unexplained, spec
    assert not result.modes["cold"].uncalibrated and result.calibration.calibrated


def _cli(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "parity.json"
    proc = subprocess.run([sys.executable, "-m", "pdctl", "parity", *args, "--max-prompt-tokens",
                           str(MAX_PROMPT_TOKENS), "--json", str(out)], capture_output=True, text=True, timeout=1200,
                          check=False)
    assert out.is_file(), proc.stderr[-3000:]
    return proc, json.loads(out.read_text())


def test_the_issue_command_passes_and_parity_starts_the_tp_control_itself(fleet, tmp_path) -> None:
    """`pdctl parity --candidate <PD router> --reference <colocated router> --cold --warm`, nothing else: the
    reference engine found behind the router, parity starts the TP2 control itself; exit 0, PARITY OK."""
    proc, doc = _cli(tmp_path, "--candidate", fleet.pd["p1d2-nixl"].router_url, "--reference",
                     fleet.routers["colocated"], "--cold", "--warm")
    assert proc.returncode == 0 and "PARITY OK" in proc.stdout, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert doc["verdict"] == "OK" and doc["tp"]["reference"] == [1, 1] and doc["tp"]["candidate"] == [1, 2]
    assert [(c["tp"], c["source"]) for c in doc["tp"]["controls"]] == [(2, "launched")]


def test_a_reference_whose_split_cannot_be_known_is_not_calibrated_never_failed(fleet, tmp_path) -> None:
    """The colocated reference behind a gateway that exposes only the serving paths (no /server_info, no
    /workers): its TP cannot be learned, the floor is the reference against itself, and the clean TP1 -> TP2
    candidate's TP rounding is beyond it — NOT CALIBRATED (exit 3), with what would calibrate it and every
    measurement, never PARITY FAILED."""
    hide = {"/server_info", "/get_server_info", "/workers", "/model_info", "/get_model_info"}
    with FlakyProxy(fleet.routers["colocated"], Faults(hidden=hide)) as gateway:
        proc, doc = _cli(tmp_path, "--candidate", fleet.pd["p1d2-nixl"].router_url, "--reference", gateway.url,
                         "--cold")
    assert proc.returncode == 3, (proc.stdout[-3000:], proc.stderr[-3000:])
    assert "PARITY NOT CALIBRATED" in proc.stdout and "PARITY FAILED" not in proc.stdout
    assert doc["verdict"] == "NOT CALIBRATED" and doc["ok"] is False and doc["tp"]["reference"] == [None, None]
    calibration = doc["calibration"]
    assert not calibration["calibrated"] and "unknown" in calibration["why"]
    assert "--tp-control URL" in calibration["calibrate_with"] and "attention TP 1, 2" in calibration["calibrate_with"]
    cold = doc["modes"]["cold"]
    assert cold["unexplained"] == 0 and cold["uncalibrated"] == len(cold["failures"]) > 0
    assert all(f["score"] > 0 and f["kl"] for f in cold["failures"])  # every measurement kept
