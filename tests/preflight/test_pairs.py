"""The transfer plan (pdctl.preflight.pairs): every node covered with about max(P, D) pairs, every link class
the topology has, rounds in which no node is busy twice; all-pairs is every pair in max(P, D) rounds."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pdctl.preflight.pairs import CROSS_NODE, NVLINK, SAME_HOST, all_pairs, plan_transfers, schedule

sizes = st.integers(min_value=1, max_value=40)


def _nodes(p: int, d: int) -> tuple[list[str], list[str]]:
    return [f"p{i}" for i in range(p)], [f"d{i}" for i in range(d)]


def _rounds_ok(plan) -> None:  # type: ignore[no-untyped-def]
    for r in plan.rounds:
        nodes = [n for pair in r for n in set(pair)]
        assert len(nodes) == len(set(nodes)), r  # no node in two pairs of one round
    assert sorted(p for r in plan.rounds for p in r) == sorted(plan.pairs)  # each pair in exactly one round


def _degree(pairs) -> int:  # type: ignore[no-untyped-def]
    count: dict[str, int] = {}
    for pair in pairs:
        for n in set(pair):
            count[n] = count.get(n, 0) + 1
    return max(count.values())


@given(sizes, sizes)
def test_cover_takes_max_p_d_pairs_over_every_node_in_the_fewest_rounds(p: int, d: int) -> None:
    prefill, decode = _nodes(p, d)
    plan = plan_transfers(prefill, decode)
    assert len(plan.pairs) == max(p, d)
    assert {a for a, _ in plan.pairs} == set(prefill) and {b for _, b in plan.pairs} == set(decode)
    _rounds_ok(plan)
    assert len(plan.rounds) == _degree(plan.pairs) == -(-max(p, d) // min(p, d))


@given(st.integers(min_value=1, max_value=12), st.integers(min_value=1, max_value=12))
def test_all_pairs_is_every_pair_in_max_p_d_rounds(p: int, d: int) -> None:
    prefill, decode = _nodes(p, d)
    plan = plan_transfers(prefill, decode, mode="all-pairs")
    assert sorted(plan.pairs) == sorted((a, b) for a in prefill for b in decode)
    _rounds_ok(plan)
    assert len(plan.rounds) == max(p, d)


@given(st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True),
       st.lists(st.sampled_from("abcdefgh"), min_size=1, max_size=8, unique=True),
       st.sampled_from(["cover", "all-pairs"]))
def test_nodes_with_both_roles_are_never_busy_twice_in_a_round(prefill: list[str], decode: list[str],
                                                               mode: str) -> None:
    plan = plan_transfers(prefill, decode, mode=mode)
    assert plan.nodes() == set(prefill) | set(decode)
    _rounds_ok(plan)


@given(sizes, sizes, st.integers(min_value=1, max_value=6), st.integers(min_value=0, max_value=40))
def test_cover_has_every_link_class_of_the_topology(p: int, d: int, machines: int, nvl: int) -> None:
    prefill, decode = _nodes(p, d)
    machine = {n: hash(n) % machines for n in prefill + decode}
    domain = {n: i < nvl for i, n in enumerate(prefill + decode)}

    def link(a: str, b: str) -> str:
        if machine[a] == machine[b]:
            return SAME_HOST
        return NVLINK if domain[a] and domain[b] else CROSS_NODE

    plan = plan_transfers(prefill, decode, link=link)
    assert {plan.links[pair] for pair in plan.pairs} == {link(a, b) for a in prefill for b in decode}
    assert len(plan.pairs) <= max(p, d) + 2
    _rounds_ok(plan)


def test_the_plan_of_4_prefill_and_4_decode_nodes_is_one_round_of_4_pairs() -> None:
    plan = plan_transfers(["p0", "p1", "p2", "p3"], ["d0", "d1", "d2", "d3"])
    assert plan.rounds == ((("p0", "d0"), ("p1", "d1"), ("p2", "d2"), ("p3", "d3")),)
    assert plan.to_json()["rounds"] == [[["p0", "d0"], ["p1", "d1"], ["p2", "d2"], ["p3", "d3"]]]


def test_one_prefill_node_serves_its_decode_nodes_one_round_each() -> None:
    plan = plan_transfers(["p"], ["d0", "d1", "d2"], mode="all-pairs")
    assert plan.rounds == ((("p", "d0"),), (("p", "d1"),), (("p", "d2"),))
    assert schedule(all_pairs(["p"], [])) == []


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="all-pairs"):
        plan_transfers(["p"], ["d"], mode="some")
