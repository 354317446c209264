"""AIConfigurator wrapped, not re-implemented: the hooks pdctl uses are where they were, pdctl's sweep IS
AIConfigurator's (its own `Task.run` + picking gives the same answer, bit for bit), lifting the same-TP gate only
adds heterogeneous pairs, and the cache replays exactly what AIConfigurator computed.

The sweep here is computed fresh every run (a small model on 4 GPUs: tens of CPU seconds), so a change in
AIConfigurator or in the wrapper is caught even when the suite's shared cache is warm."""

from __future__ import annotations

import inspect
import json

import pytest

from pdctl.suggest import aic
from pdctl.suggest.cache import Cache, frame_from_json, frame_to_json

SMALL = aic.AicQuery("openai/gpt-oss-20b", "h100_sxm", 4, 2048, 256)  # 4 GPUs: room for 2x TP1 + 1x TP2
TTFT, TPOT = 1000.0, 20.0


def test_the_hooks_pdctl_uses_are_aiconfigurators() -> None:
    """Breaks when AIConfigurator 0.12.0's sweep changes the places pdctl hooks into (then re-read
    sdk/sweep.py and sdk/task_v2.py, and docs/suggest.md's "How AIConfigurator is wrapped")."""
    from aiconfigurator.sdk import sweep
    from aiconfigurator.sdk.task_v2 import Task

    assert list(inspect.signature(sweep._rate_match_dict).parameters)[:4] == [
        "prefill_summary_dict", "prefill_num_worker", "decode_summary_dict", "decode_num_worker"]
    assert "role" in inspect.signature(sweep._get_disagg_worker_candidates).parameters
    assert "require_same_tp" in inspect.signature(sweep.sweep_disagg).parameters
    source = inspect.getsource(sweep._find_best_disagg_under_constraint)
    # the gate: a (prefill, decode) pair of different attention TP is skipped when the predicate says so ...
    assert 'if p_worker["tp"] != d_worker["tp"] and requires_same_tp(p_worker, d_worker):' in source
    # ... and every pair that survives goes through _rate_match_dict (what pdctl records), rounded to 3 places
    assert "disagg_dict = _rate_match_dict(" in source and ".round(3)" in source
    assert '"require_same_tp": self._require_same_tp_gate()' in inspect.getsource(Task.sweep_disagg_kwargs)


def test_for_sglang_aiconfigurator_forces_same_tp_and_pdctl_lifts_it_by_parameter() -> None:
    with aic.quiet():
        task = aic.build_task(SMALL, TTFT, TPOT)
    assert task._require_same_tp_gate() is True  # gpt-oss on sglang: no large-EP exemption, the gate applies
    assert task.pareto_sweep is True  # its own TPOT list, not the target: why the cache key has no ITL
    placeholders = {"prefill": object(), "decode": object()}  # no perf database is loaded for kwargs alone
    assert aic.sweep_kwargs(task, placeholders, lift_gate=False)["require_same_tp"] is True
    assert aic.sweep_kwargs(task, placeholders, lift_gate=True)["require_same_tp"] is False


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """AIConfigurator's own run (its Task.run, then its picking), computed now, with its worker frames observed
    on the way (the recording hooks return what AIConfigurator's functions return); pdctl's sweeps replay them."""
    from aiconfigurator.cli.utils import process_experiment_result
    from aiconfigurator.sdk import sweep

    frames: dict = {}
    seen: list[dict] = []
    with aic.quiet():
        task = aic.build_task(SMALL, TTFT, TPOT)
        with aic.recording(sweep, frames, seen):
            own_df = task.run()
        own = process_experiment_result(task, {"pareto_df": own_df}, top_n=5)[0]
    root = tmp_path_factory.mktemp("aic-cache")
    Cache(root).put_frames(SMALL.key(), frames)
    kept = aic.run_sweep(SMALL, ttft=TTFT, tpot=TPOT, lift_gate=False, store=Cache(root))
    lifted = aic.run_sweep(SMALL, ttft=TTFT, tpot=TPOT, lift_gate=True, store=Cache(root))
    return {"own": own, "seen": seen, "kept": kept, "lifted": lifted, "root": root}


def test_pdctls_sweep_gives_aiconfigurators_own_answer_bit_for_bit(fresh: dict) -> None:
    own, kept = fresh["own"], fresh["kept"]
    assert len(own) > 0 and not kept.meta["cached"] and kept.meta["workers_cached"]
    assert kept.rows == aic.AicRows(*aic.rows_of(fresh["seen"])).rows  # the rows AIConfigurator's own run matched
    cols = [c for c in (*aic.ROW_COLUMNS, "tokens/s/gpu_cluster") if c in own.columns]
    expected = [dict(zip(cols, (v.item() if hasattr(v, "item") else v for v in row)))
                for row in own[cols].itertuples(index=False, name=None)]
    assert aic.own_answer(SMALL, ttft=TTFT, tpot=TPOT, store=Cache(fresh["root"])) == expected  # exact floats
    recorded = {tuple(r) for r in kept.rows}
    for row in expected:  # and every row of its answer is among the rows pdctl ranks, with the same figures
        assert tuple(row[c] for c in aic.ROW_COLUMNS) in recorded, row


def test_lifting_the_gate_adds_heterogeneous_pairs(fresh: dict) -> None:
    kept, lifted = fresh["kept"].records(), fresh["lifted"].records()
    assert kept and all(r["(p)tp"] == r["(d)tp"] for r in kept)
    hetero = [r for r in lifted if r["(p)tp"] != r["(d)tp"]]
    assert hetero, "no heterogeneous-TP row with the gate lifted"
    assert fresh["lifted"].meta["gate"] == "lifted"
    # the gate only skips pairs (AIConfigurator's candidate lists are cut before it): the same-TP rows of the
    # lifted sweep are exactly the rows AIConfigurator's own gate lets through
    same = {tuple(sorted(r.items())) for r in lifted if r["(p)tp"] == r["(d)tp"]}
    assert same == {tuple(sorted(r.items())) for r in kept}


def test_the_cache_replays_exactly_what_aiconfigurator_computed(fresh: dict) -> None:
    # pdctl's sweeps above ran on worker frames written to the cache as JSON and read back: rows and answer
    # were exactly AIConfigurator's (previous tests). The frames' JSON form is stable, and a second call is a
    # cache hit with the same rows.
    store = Cache(fresh["root"])
    frames = store.get_frames(SMALL.key())
    assert set(frames) == {"prefill", "decode"} and len(frames["decode"]) > 0
    for frame in frames.values():
        doc = frame_to_json(frame)
        assert frame_to_json(frame_from_json(json.loads(json.dumps(doc)))) == doc
    again = aic.run_sweep(SMALL, ttft=TTFT, tpot=TPOT, lift_gate=False, store=store)
    assert again.meta["cached"] and again.rows == fresh["kept"].rows
    assert again.meta["sweep"] == fresh["kept"].meta["sweep"]
