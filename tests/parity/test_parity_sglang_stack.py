"""The reference engine on SGLang's own transfer stack (`--transfer-stack sglang`: SGLang 0.5.23's KV managers,
senders, receivers and bootstrap server carry every request's KV and first token) passes parity against a PD
full-cache reference on pdctl's own stack: prefill TP1 -> decode TP2 and TP2 -> TP1, over NIXL and Mooncake,
behind the real sglang-router, cold + warm + concurrent.

SGLang's NIXL agents keep NIXL's progress thread (as SGLang configures them), so these servers are not idle
when idle (docs/sglang-stack.md); they are started once for the module and torn down after.
"""

from __future__ import annotations

import pytest

from pdctl.parity.session import ParityRequest, run_request
from tests.parity.test_parity_matrix import CHUNK, FULL_CACHE, MAX_PROMPT_TOKENS, SPLITS, assert_parity
from tests.support.pd import PairSpec, start_pd_pairs

pytestmark = pytest.mark.e2e
CANDIDATES = {f"{split}-{backend}-sglang": (split, backend) for split in SPLITS for backend in ("nixl", "mooncake")}


@pytest.fixture(scope="module")
def matrix(ref_checkpoint, sglang_stack_python, tmp_path_factory):
    pairs = {f"ref-{s}": PairSpec(p, d, "nixl", both_args=CHUNK + FULL_CACHE) for s, (p, d) in SPLITS.items()}
    for name, (split, backend) in CANDIDATES.items():
        pairs[name] = PairSpec(*SPLITS[split], backend=backend, both_args=CHUNK, sglang_python=sglang_stack_python)
    with start_pd_pairs(ref_checkpoint, pairs, log_dir=tmp_path_factory.mktemp("sglang-stack"),
                        timeout=600) as deployments:
        yield deployments


@pytest.mark.parametrize("name", CANDIDATES)
def test_reference_engine_on_sglang_stack_matches_the_full_cache_reference(matrix, name):
    split = CANDIDATES[name][0]
    req = ParityRequest(candidate_url=matrix[name].router_url, reference_url=matrix[f"ref-{split}"].router_url,
                        modes=("cold", "warm", "concurrent"), max_prompt_tokens=MAX_PROMPT_TOKENS, copies=2)
    assert_parity(run_request(req), matrix, name)
    # the KV really went through SGLang's stack: the decode server ran SGLang's managers (its log says so)
    assert "SGLang 0.5.23 stack" in matrix[name].decode.log_tail(400), matrix[name].log_tails()
