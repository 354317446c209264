"""The field-incident rules' SGLang facts against SGLang 0.5.23's own code (side venv, e2e).

SGLang has no guard for a field incident, so there is no verdict to compare (the differential suite leaves
those rules out of its comparison, test_differential.py); what SGLang does have is the arithmetic and the
parsing the rules rest on: the KV pool it sizes from a budget (pool_configurator.py), the timeouts it reads
from the environment (environ.py), its words when the pool is empty, the prefill CUDA-graph sizes its memory
heuristic reserves for. Those are held against pdctl here, case by case.
"""

from __future__ import annotations

import random

import pytest

from pdctl.sglang import memory, messages
from pdctl.sglang.settings import DISAGG_TIMEOUTS, env_number

pytestmark = pytest.mark.e2e  # starts the SGLang side interpreter


def test_kv_pool_sizes_equal_sglangs(oracle) -> None:
    rng = random.Random(24)
    cases = []
    for _ in range(600):
        swa = rng.random() < 0.5
        layers = rng.choice([4, 24, 32, 36, 61])
        cases.append({"kv_heads": rng.choice([1, 2, 4, 8, 16, 128]), "head_dim": rng.choice([64, 128, 192]),
                      "tp": rng.choice([1, 2, 4, 8, 16]), "full_layers": layers // 2 if swa else layers,
                      "swa_layers": layers - layers // 2 if swa else 0, "element_bytes": rng.choice([1, 2]),
                      "ratio": rng.choice([0.5, 0.8, 1.0]), "window": 128, "page": rng.choice([1, 16, 64, 128]),
                      "budget": rng.randrange(1 << 28, 300 << 30)})
    bad = []
    for case, theirs in zip(cases, oracle.ask("kv_pool", cases)):
        layout = memory.kv_layout(kv_heads=case["kv_heads"], head_dim=case["head_dim"], attn_tp=case["tp"],
                                  full_layers=case["full_layers"], swa_layers=case["swa_layers"],
                                  element_bytes=case["element_bytes"], swa_ratio=case["ratio"])
        mine = memory.pool_sizes(case["budget"], layout, case["page"])
        if "error" in theirs:  # SGLang refuses an SWA pool at or below window + page: so does kv-capacity
            floor = case["window"] + case["page"]
            said = messages.swa_pool_too_small(mine.swa_tokens or 0, case["window"], case["page"])
            if mine.swa_tokens is None or mine.swa_tokens > floor or theirs["error"] != f"ValueError: {said}":
                bad.append(f"{case}: pdctl {mine}, SGLang {theirs}")
            continue
        got = (layout.cell_bytes, mine.max_total_num_tokens, mine.swa_tokens)
        want = (theirs["cell"], theirs["tokens"], theirs["swa"])
        if got[0] != pytest.approx(want[0]) or got[1:] != want[1:]:
            bad.append(f"{case}: pdctl {got}, SGLang {want}")
    assert not bad, f"{len(bad)} KV pool mismatch(es) with SGLang:\n" + "\n".join(bad[:20])


def test_timeout_variables_read_as_sglang_reads_them(oracle) -> None:
    values = ["1e9", "1000000000", "0", "-5", "600", "abc", "2.5", "86400"]
    cases = [{"name": name, "value": v} for name in DISAGG_TIMEOUTS for v in values]
    bad = []
    for case, theirs in zip(cases, oracle.ask("env_number", cases)):
        kind, default, floor, _side = DISAGG_TIMEOUTS[case["name"]]
        used, unparsed = env_number({case["name"]: case["value"]}, case["name"])
        want = theirs["value"] if floor is None else max(theirs["value"], floor)  # conn.py applies the floor
        said = [messages.env_invalid(case["name"], unparsed, kind, default)] if unparsed is not None else []
        if used != want or said != theirs["warnings"]:
            bad.append(f"{case}: pdctl {used} {said}, SGLang {want} {theirs['warnings']}")
    assert not bad, "\n".join(bad)


def test_memory_words_and_graph_reserve_equal_sglangs(oracle) -> None:
    cases = [{"mem_fraction_static": f, "max_bs": bs} for f, bs in [(0.8, 8192), (0.812, 16384), (0.5, 4096),
                                                                      (0.9, 2048), (0.3, 1000), (0.75, 20000)]]
    for case, theirs in zip(cases, oracle.ask("memory_messages", cases)):
        assert theirs["error"] == messages.not_enough_memory(case["mem_fraction_static"])
        assert theirs["prefill_graph_sizes"] == memory.prefill_graph_sizes(case["max_bs"]), case
