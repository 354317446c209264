"""Parity's method against an engine that differs from itself the way GPU servers do (`--numerics gpu-like`):
cold comparisons are exact (same shapes, same bits), warm and concurrent ones differ — within or beyond the
tolerance — and every failure carries its attribution (prefill differed before the transfer / within the
control noise / unexplained); a corrupted candidate still fails. PD TP2 -> TP1 (the seed's configuration)
against a PD full-cache reference of the same split, both gpu-like.
"""

from __future__ import annotations

import pytest

from pdctl.parity.session import ParityRequest, run_request
from tests.support.pd import PairSpec, start_pd_pairs

pytestmark = pytest.mark.e2e
GPU_LIKE = ("--numerics", "gpu-like", "--chunked-prefill-size", "48")
BROKEN_DECODE = ("--kv-layout", "vectorized_5d", "--unsafe-skip-handshake-checks")


@pytest.fixture(scope="module")
def deployments(ref_checkpoint, tmp_path_factory):
    pairs = {
        "reference": PairSpec(2, 1, both_args=GPU_LIKE + ("--disable-hybrid-swa-memory",)),
        "candidate": PairSpec(2, 1, both_args=GPU_LIKE),
        "corrupted": PairSpec(2, 1, both_args=GPU_LIKE, decode_args=BROKEN_DECODE),
    }
    with start_pd_pairs(ref_checkpoint, pairs, log_dir=tmp_path_factory.mktemp("gpu-like")) as deps:
        yield deps


def _run(deployments, name):
    return run_request(ParityRequest(
        candidate_url=deployments[name].router_url, reference_url=deployments["reference"].router_url,
        modes=("cold", "warm", "concurrent"), max_prompt_tokens=49, copies=3))


def attribution(comp) -> str:
    """The three outcomes a failure can have."""
    return {"prefill_differs": "prefill differed before transfer", "control": "within control noise"}.get(
        comp.explained_by or "", "unexplained")


def test_gpu_like_numerics_differ_where_gpus_do_and_each_failure_is_attributed(deployments, capsys):
    result = _run(deployments, "candidate")
    cold = result.modes["cold"]
    assert cold.ok and all(c.passed and c.max_abs_delta == 0.0 for c in cold.comparisons)  # cold: exact
    counts = {}
    for name in ("warm", "concurrent"):
        mode = result.modes[name]
        c = counts[name] = {
            "compared": len(mode.comparisons),
            "exact": sum(x.passed and x.max_abs_delta == 0.0 for x in mode.comparisons),
            "within_tolerance": sum(x.passed and x.max_abs_delta > 0.0 for x in mode.comparisons),
            "failed": len(mode.failures),
        }
        for failure in mode.failures:
            key = attribution(failure)
            c[key] = c.get(key, 0) + 1
            assert failure.explained_by or failure.unexplained_because  # every failure says why (or why not)
        assert mode.control is not None and mode.control_floor is not None and mode.control_floor > 0
    differing = sum(c["within_tolerance"] + c["failed"] for c in counts.values())
    assert differing > 0, counts  # batching and prefix reuse change the numbers, as on GPUs
    with capsys.disabled():
        print(f"\ngpu-like parity counts: cold {len(cold.comparisons)}/{len(cold.comparisons)} exact; {counts}")


def test_a_corrupted_candidate_still_fails(deployments):
    result = _run(deployments, "corrupted")
    assert not result.ok
    cold = result.modes["cold"]
    assert cold.failures and not cold.ok
    assert all(not f.prefill_differs for f in cold.failures)  # prefill is intact: the transfer broke it
    assert all(f.explained_by is None for f in cold.failures)  # nothing explains a cold failure away
