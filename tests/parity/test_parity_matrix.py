"""The seed's parity method, for real: PD candidates (prefill TP1 -> decode TP2 and TP2 -> TP1, over NIXL and
over Mooncake, hybrid SWA memory) against a PD full-cache reference of the same TP split
(`--disable-hybrid-swa-memory`), cold + warm + concurrent — on an idle machine, then with every core kept busy
by a pinned busy-loop process for the whole run (liveness must tolerate the slowness, not fail rooms).

Every server prefills in 48-token chunks, so the suite's "chunk" / "past_chunk" prompts cross a real chunk
boundary. Deployments are started once, all at once, for the module.
"""

from __future__ import annotations

import pytest

from pdctl.parity.results import ParityResult
from pdctl.parity.session import ParityRequest, run_request
from tests.support.busy import busy_cores
from tests.support.cpu import idle_share
from tests.support.pd import PairSpec, start_pd_pairs

pytestmark = pytest.mark.e2e
CHUNK = ("--chunked-prefill-size", "48")
FULL_CACHE = ("--disable-hybrid-swa-memory",)
SPLITS = {"p1d2": (1, 2), "p2d1": (2, 1)}
CANDIDATES = {f"{split}-{backend}": (split, backend) for split in SPLITS for backend in ("nixl", "mooncake")}
IDLE_WINDOW_S = 5.0
MAX_PROMPT_TOKENS = 49  # page (16) edges, the window (32) and the chunk (48), crossed by one token each


@pytest.fixture(scope="module")
def matrix(ref_checkpoint, tmp_path_factory):
    pairs = {f"ref-{s}": PairSpec(p, d, "nixl", both_args=CHUNK + FULL_CACHE) for s, (p, d) in SPLITS.items()}
    for name, (split, backend) in CANDIDATES.items():
        pairs[name] = PairSpec(*SPLITS[split], backend=backend, both_args=CHUNK)
    with start_pd_pairs(ref_checkpoint, pairs, log_dir=tmp_path_factory.mktemp("matrix")) as deployments:
        yield deployments


def run_parity(matrix, name: str, **options) -> ParityResult:
    """`pdctl parity --candidate ROUTER --reference FULL_CACHE_ROUTER --cold --warm --concurrent` (in-process)."""
    split = CANDIDATES[name][0]
    req = ParityRequest(candidate_url=matrix[name].router_url, reference_url=matrix[f"ref-{split}"].router_url,
                        modes=("cold", "warm", "concurrent"), max_prompt_tokens=MAX_PROMPT_TOKENS, copies=2,
                        max_new_tokens=4, **options)
    return run_request(req)


def assert_parity(result: ParityResult, matrix, name: str) -> None:
    doc = result.document()
    logs = matrix[name].log_tails()
    assert doc["ok"] is True, ({m: d["failures"] for m, d in doc["modes"].items()}, logs)
    assert {15, 16, 17, 32, 33, 48, 49} <= {p["tokens"] for p in doc["prompts"]}
    for mode in ("cold", "warm", "concurrent"):
        m = doc["modes"][mode]
        assert m["compared"] > 0 and m["passed"] == m["compared"], (mode, m["failures"], logs)
        assert m["max_abs_delta"] <= 1e-4, (mode, m["max_abs_delta"])  # exact numerics: PD == PD bit for bit
    assert max(doc["modes"]["warm"]["cached_tokens"]) >= 48  # prefill reused three pages of the 49-token prompt
    assert doc["candidate_workers"]["decode"] == [matrix[name].decode_url]


def test_idle_deployments_cost_no_cpu(matrix):
    """With nothing in flight every server process sleeps (NIXL without its spinning progress thread): each
    uses under 5% of a core over a few seconds (it was ~100% per NIXL agent; benchmarks/bench_idle.py has the
    numbers). CPU accounting, not timing: a spinning thread accumulates CPU time even on a loaded machine."""
    pids = {f"{name}/{role}": getattr(dep, role).proc.pid for name, dep in matrix.items() for role in ("prefill", "decode")}
    share = idle_share(pids, IDLE_WINDOW_S)
    assert all(v < 0.05 for v in share.values()), share


@pytest.mark.parametrize("name", CANDIDATES)
def test_pd_matches_the_full_cache_pd_reference(matrix, name):
    assert_parity(run_parity(matrix, name), matrix, name)


def test_the_same_on_a_machine_kept_busy(matrix):
    """Two busy-loop processes (one per core) run for the whole test: every candidate still passes."""
    with busy_cores() as hogs:
        assert len(hogs) >= 2
        for name in CANDIDATES:
            assert_parity(run_parity(matrix, name, control=False), matrix, name)
            assert all(h.poll() is None for h in hogs)  # the load really lasted
