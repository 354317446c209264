"""The suggestion pipeline on AIConfigurator's real rows (gpt-oss-120b, 8 x GB300, ISL 8192 / OSL 1024, TTFT 2 s /
ITL 30 ms; cached, tests/support/suggest.py): heterogeneous TP appears, the KV term moves TTFT and the winner,
SGLang's rules reject what SGLang would reject, and nothing feasible is said so."""

from __future__ import annotations

import dataclasses

import pytest
import yaml

from pdctl.suggest.candidate import from_row
from pdctl.suggest.kv import KvModel
from pdctl.suggest.link import unlimited
from pdctl.suggest.request import resolve
from pdctl.suggest.run import check_row, suggest
from tests.support.paths import CONFIGS_DIR
from tests.support.suggest import request, store


def _run(**changes):
    return suggest(resolve(request(**changes)), store=store())


@pytest.fixture(scope="module")
def nominal():
    return _run()


def _hetero(c) -> bool:
    return c.prefill.attn_tp != c.decode.attn_tp and c.prefill.cp == 1  # cp rows are rejected unjudged


def test_heterogeneous_tp_candidates_appear_where_sglang_runs_them(nominal) -> None:
    assert nominal.lifted and nominal.aic_meta["gate"] == "lifted"
    fast = _run(us_per_descriptor=0.01)  # a link that posts descriptors cheaply: head-slice pairs become viable
    hetero = [c for c in fast.candidates if _hetero(c)]
    assert hetero and any(c.ok for c in hetero)
    assert {c.kv.path for c in hetero if c.kv} == {"head-slice"}
    # SGLang 0.5.21 cannot move sliding-window KV between different TPs: AIConfigurator's gate stays, no pair
    old = _run(version="0.5.21", us_per_descriptor=0.01)
    assert not old.lifted and not any(_hetero(c) for c in old.candidates)


def test_a_best_candidate_meets_the_targets_and_ranks_first(nominal) -> None:
    best = nominal.candidates[nominal.best]
    assert best.ok and best.ttft_ms <= 2000 and best.itl_ms <= 30 and best.kv.link_load <= 1
    assert best.ttft_ms == pytest.approx(best.row["ttft"] + best.kv.transfer_ms)
    ok = [c for c in nominal.candidates if c.ok]
    assert [c.tokens_per_s_per_gpu for c in ok] == sorted((c.tokens_per_s_per_gpu for c in ok), reverse=True)
    assert all(not c.ok for c in nominal.candidates[len(ok):])  # the rejected come after every feasible one
    doc = nominal.document()
    assert doc["ok"] is True and doc["best"] == 0
    for key in ("prefill", "decode", "aic", "kv_transfer_ms", "ttft_ms", "itl_ms", "tokens_per_s_per_gpu",
                "verdict", "rules"):
        assert key in doc["candidates"][0], key
    for key in ("tp", "dp", "enable_dp_attention", "replicas", "max_running_requests"):
        assert key in doc["candidates"][0]["decode"], key
    assert set(doc["candidates"][0]["aic"]) >= {"ttft_ms", "tpot_ms", "tokens_per_s_per_gpu"}


def test_with_no_kv_term_the_figures_are_aiconfigurators_own(nominal) -> None:
    free = suggest(dataclasses.replace(resolve(request(version="0.5.21")), link=unlimited()), store=store(),
                   with_aic_answer=True)  # AIConfigurator's gate and no KV term: its own model exactly
    answer = free.aic_answer
    assert answer, "AIConfigurator answered nothing"
    best = free.candidates[free.best]
    assert best.tokens_per_s_per_gpu == answer[0]["tokens/s/gpu_cluster"]  # bit for bit, same rows, same math
    assert best.ttft_ms == best.row["ttft"] and best.kv.transfer_ms == 0.0
    # the lifted sweep can only add deployments: never a worse best
    lifted = suggest(dataclasses.replace(resolve(request()), link=unlimited()), store=store())
    assert lifted.candidates[lifted.best].tokens_per_s_per_gpu >= best.tokens_per_s_per_gpu


def test_a_slow_link_raises_ttft_and_changes_the_winner(nominal) -> None:
    slow_inputs = resolve(request(link_gbps=1.0, us_per_descriptor=1.0))  # TCP, not the GB300's 800G NIC
    slow = suggest(slow_inputs, store=store())
    winner = nominal.candidates[nominal.best]
    # the nominal winner's own row on the slow link: ~300 MB per request at 1 GB/s, at 25 requests/s
    again = from_row(winner.row, slow_inputs.gpus)
    check_row(again, slow_inputs, KvModel(slow_inputs.kv_shape, slow_inputs.link))
    assert again.ttft_ms > winner.ttft_ms + 250
    assert not again.ok and "kv-link-capacity" in {p["rule"] for p in again.problems}
    assert slow.best is not None, [c.problems for c in slow.nearest_misses()]
    new = slow.candidates[slow.best]
    assert new.shape != winner.shape and new.kv.link_load <= 1 and new.ttft_ms <= 2000
    assert new.tokens_per_s_per_gpu < winner.tokens_per_s_per_gpu


def test_rejected_candidates_carry_sglangs_rule(tmp_path) -> None:
    # a skeleton whose KV layout is HND: SGLang's head-slice transfer (unequal TP) needs NHD
    skeleton = yaml.safe_load((CONFIGS_DIR / "gpt-oss-120b-p1-d4-gb300-nixl.yaml").read_text())
    skeleton["server"]["kv_layout"] = "hnd"
    path = tmp_path / "hnd.yaml"
    path.write_text(yaml.safe_dump(skeleton))
    result = suggest(resolve(request(model=None, system=None, gpus=None, topology=str(path),
                                     us_per_descriptor=0.01)), store=store())
    hetero = [c for c in result.candidates if _hetero(c)]
    assert hetero and all("hetero-tp-swa-layout" in {p["rule"] for p in c.problems} for c in hetero)
    rule = next(p for p in hetero[0].problems if p["rule"] == "hetero-tp-swa-layout")
    assert "NHD" in rule["message"] and rule["stage"] == "first transfer"
    assert result.ok and not _hetero(result.candidates[result.best])
    doc = result.document()["candidates"]
    assert any(c["verdict"] == "rejected" and any(r["rule"] == "hetero-tp-swa-layout" for r in c["rules"])
               for c in doc)


def test_nothing_feasible_gives_the_nearest_misses_first() -> None:
    result = _run(ttft_ms=50.0)  # below every prefill worker's latency: AIConfigurator keeps no row at 50 ms
    assert not result.ok and result.best is None and result.document()["ok"] is False
    assert result.aic_meta["ttft_budget"] == 200.0  # swept again with a looser budget to find the near misses
    misses = result.nearest_misses(3)
    assert misses and all("ttft-target" in {p["rule"] for p in c.problems} for c in misses)
    assert all(c.ttft_ms > 50.0 for c in result.candidates)
