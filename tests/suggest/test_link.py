"""The KV link: nominal, given, and fitted from pdctl's own measurement documents (bench-transfer, preflight)."""

from __future__ import annotations

import json
import math

import pytest

from pdctl.errors import UserError
from pdctl.suggest import link


def test_fit_recovers_bandwidth_and_per_descriptor_cost_from_two_runs_of_the_same_bytes() -> None:
    nbytes, gbps, us = 300e6, 25.0, 0.8
    t = lambda n: nbytes / (gbps * 1e9) + n * us * 1e-6
    got_gbps, got_us = link.fit(nbytes, t(600_000), 600_000, t(72), 72)
    assert got_gbps == pytest.approx(gbps) and got_us == pytest.approx(us)


def test_a_noisy_fit_falls_back_to_the_fast_runs_bandwidth_never_a_negative_cost() -> None:
    # the many-descriptor run came out FASTER (noise): no negative cost, the slow run's excess is 0
    gbps, us = link.fit(1e9, 0.09, 1_000_000, 0.1, 10)
    assert gbps == pytest.approx(10.0) and us == 0.0


def _bench_doc(per_token_s: float, packed_s: float, ok: bool = True) -> dict:
    path = {"bytes": 200_000_000, "verified": ok}
    return {"ok": ok, "paths": {"per_token": {**path, "descriptors": 400_000, "seconds": per_token_s + 0.01,
                                              "wire_seconds": per_token_s},
                                "packed": {**path, "descriptors": 96, "seconds": packed_s + 0.02,
                                           "wire_seconds": packed_s}}}


def test_bench_transfer_document_gives_both_numbers_from_its_two_paths(tmp_path) -> None:
    f = tmp_path / "bench.json"
    f.write_text(json.dumps(_bench_doc(per_token_s=2.0 + 400_000 * 5e-6, packed_s=2.0 + 96 * 5e-6)))
    got = link.from_file(str(f))
    assert got.gbps == pytest.approx(0.1) and got.us_per_descriptor == pytest.approx(5.0)
    assert got.source == f"--transfer-from {f}" and "wire_seconds" in got.note


def test_preflight_document_uses_the_slowest_verified_pair(tmp_path) -> None:
    def transfer(src: str, packed_gbps: float, verified: bool = True) -> dict:
        nbytes, descriptors = 200_000_000, 400_000
        seconds = nbytes / (packed_gbps * 1e9) + descriptors * 2e-6
        return {"from": src, "to": "d0", "gbps": nbytes / seconds / 1e9, "verified": verified,
                "us_per_descriptor": seconds / descriptors * 1e6, "descriptors": descriptors, "bytes": nbytes,
                "details": {"packed_gbps": packed_gbps}}
    doc = {"ok": True, "nodes": [], "transfers": [transfer("p0", 40.0), transfer("p1", 8.0),
                                                  transfer("p2", 0.5, verified=False)]}
    f = tmp_path / "preflight.json"
    f.write_text(json.dumps(doc))
    got = link.from_file(str(f))
    assert got.gbps == pytest.approx(8.0) and got.us_per_descriptor == pytest.approx(2.0)
    assert "p1 -> d0" in got.note and "of 2" in got.note  # the unverified pair is not a measurement


def test_one_measured_path_is_charged_per_byte(tmp_path) -> None:
    f = tmp_path / "sglang.json"
    f.write_text(json.dumps({"ok": True, "stack": "sglang", "gbps": 3.5, "descriptors": 1000}))
    got = link.from_file(str(f))
    assert (got.gbps, got.us_per_descriptor) == (3.5, 0.0)


@pytest.mark.parametrize(("content", "message"), [
    ("{not json", "not JSON"),
    ("[1, 2]", "expected a JSON object"),
    (json.dumps({"ok": False, "paths": {}}), "the measurement failed"),
    (json.dumps({"ok": True, "hello": 1}), "neither a bench-transfer document"),
    (json.dumps({"ok": True, "paths": {"per_token": {}}}), "missing or not a number"),
    (json.dumps({"ok": True, "transfers": [{"verified": False, "gbps": 1.0}]}), "no verified transfer"),
    (json.dumps({"ok": True, "gbps": 0, "descriptors": 1}), "nothing to price"),
])
def test_unusable_measurements_are_bad_input(tmp_path, content: str, message: str) -> None:
    f = tmp_path / "m.json"
    f.write_text(content)
    with pytest.raises(UserError, match=message):
        link.from_file(str(f))


def test_missing_file_is_bad_input(tmp_path) -> None:
    with pytest.raises(UserError, match="cannot read it"):
        link.from_file(str(tmp_path / "nope.json"))


def test_nominal_given_and_unlimited() -> None:
    assert link.nominal("gb300").gbps == 100.0 and link.nominal("h100").gbps == 50.0
    assert link.nominal("h100").source == "nominal" and "measure the nodes" in link.nominal("h100").note
    g = link.given(1.0, None)
    assert g.us_per_descriptor == link.NOMINAL_US_PER_DESCRIPTOR and "assumed" in g.note
    assert link.given(1.0, 0.0).us_per_descriptor == 0.0 and link.given(1.0, 0.0).note is None
    for bad in (0.0, -1.0, math.inf, math.nan):
        with pytest.raises(UserError):
            link.given(bad, None)
    u = link.unlimited()
    assert u.unlimited and u.seconds(1e12, 1e9) == 0.0 and u.to_dict()["gbps"] is None
    assert link.given(2.0, 0.5).seconds(4e9, 2_000_000) == pytest.approx(2.0 + 1.0)
