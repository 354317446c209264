"""Which (prefill node, decode node) pairs the transfer test runs, and in which rounds: a small pure function.

Why not every pair: P x D pairs grow with the square of the cluster (1,024 at 32 x 32 nodes) while the
question preflight answers — does every node's KV path work — grows with the nodes. `cover` takes about
max(P, D) pairs so that every prefill node and every decode node is in at least one, and adds one pair of each
link class the topology has (same host, one NVLink domain, cross-node) that the pairing missed; `all-pairs` is
every pair, for when a user suspects one link. Rounds: no node is in two pairs of one round (a node's link is
measured alone, its transfer agent serves one pair at a time), and the pairs of a round run in parallel. The
number of rounds is the busiest node's number of pairs whenever prefill and decode nodes are distinct (a
Latin-square order for all-pairs; the cyclic cover is already one round when P == D).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

Pair = tuple[str, str]  # (prefill node, decode node)
Link = Callable[[str, str], str]  # (prefill node, decode node) -> its link class
MODES = ("cover", "all-pairs")
SAME_HOST, NVLINK, CROSS_NODE = "same host", "nvlink domain", "cross-node"


@dataclass(frozen=True)
class TransferPlan:
    """The pairs the transfer test runs, grouped into rounds, and each pair's link class."""

    mode: str
    pairs: tuple[Pair, ...]
    rounds: tuple[tuple[Pair, ...], ...]
    links: dict[Pair, str]

    def nodes(self) -> set[str]:
        """Every node some pair of the plan takes part in."""
        return {n for pair in self.pairs for n in pair}

    def to_json(self) -> dict[str, Any]:
        return {"mode": self.mode, "pairs": [list(p) for p in self.pairs],
                "rounds": [[list(p) for p in r] for r in self.rounds],
                "links": [[p, d, self.links[(p, d)]] for p, d in self.pairs]}


def _cross(_p: str, _d: str) -> str:
    return CROSS_NODE


def cover_pairs(prefill: Sequence[str], decode: Sequence[str], link: Link = _cross) -> list[Pair]:
    """About max(P, D) pairs covering every prefill and every decode node (pair i: prefill i mod P with
    decode i mod D), plus one pair of each link class present among all pairs but missed by that pairing."""
    if not prefill or not decode:
        return []
    pairs = [(prefill[i % len(prefill)], decode[i % len(decode)]) for i in range(max(len(prefill), len(decode)))]
    pairs = list(dict.fromkeys(pairs))
    seen = {link(p, d) for p, d in pairs}
    load: dict[str, int] = {}
    for p, d in pairs:
        load[p], load[d] = load.get(p, 0) + 1, load.get(d, 0) + 1
    missing: dict[str, list[Pair]] = {}
    for p in prefill:
        for d in decode:
            kind = link(p, d)
            if kind not in seen:
                missing.setdefault(kind, []).append((p, d))
    for candidates in missing.values():  # the least busy pair of the class: rounds stay few
        pairs.append(min(candidates, key=lambda pd: load.get(pd[0], 0) + load.get(pd[1], 0)))
    return pairs


def all_pairs(prefill: Sequence[str], decode: Sequence[str]) -> list[Pair]:
    """Every (prefill, decode) pair, in Latin-square order: round r of the greedy schedule is then prefill i
    with decode (i + r) mod D (or the transpose), max(P, D) rounds when the node sets are distinct."""
    n_p, n_d = len(prefill), len(decode)
    if n_p <= n_d:
        order = [(prefill[i], decode[(i + r) % n_d]) for r in range(n_d) for i in range(n_p)]
    else:
        order = [(prefill[(j + r) % n_p], decode[j]) for r in range(n_p) for j in range(n_d)]
    return list(dict.fromkeys(order))


def schedule(pairs: Sequence[Pair]) -> list[list[Pair]]:
    """Greedy rounds: each pair, in order, joins the first round in which neither of its nodes is busy."""
    rounds: list[list[Pair]] = []
    busy: list[set[str]] = []
    for pair in pairs:
        nodes = set(pair)
        for i, taken in enumerate(busy):
            if not nodes & taken:
                rounds[i].append(pair)
                taken |= nodes
                break
        else:
            rounds.append([pair])
            busy.append(set(nodes))
    return rounds


def plan_transfers(prefill: Sequence[str], decode: Sequence[str], *, mode: str = "cover",
                   link: Link = _cross) -> TransferPlan:
    """The transfer test's plan over the distinct PREFILL and DECODE nodes (in topology order); LINK names
    the link class of a pair."""
    if mode not in MODES:
        raise ValueError(f"unknown transfer plan mode {mode!r}: expected one of {', '.join(MODES)}")
    prefill, decode = list(dict.fromkeys(prefill)), list(dict.fromkeys(decode))
    pairs = cover_pairs(prefill, decode, link) if mode == "cover" else all_pairs(prefill, decode)
    rounds = schedule(pairs)
    ordered = tuple(p for r in rounds for p in r)
    return TransferPlan(mode, ordered, tuple(tuple(r) for r in rounds), {pd: link(*pd) for pd in ordered})
