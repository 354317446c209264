"""Fuzz: any text or any mutated value either loads or raises UserError — never another exception."""

from __future__ import annotations

import math
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pdctl.errors import UserError
from pdctl.topology import Topology, load_topology_text
from tests.support.topologies import COLOCATED, FULL, MINIMAL

# A few hundred examples keep this under ~10 s; no example database (nothing written to the tree).
FUZZ = settings(max_examples=300, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])
YAML_CHARS = st.sampled_from(
    list(":-[]{}&*!|>'\"#%@,?<=~ \t\n") + list("abcxyz019._") + ["\x00", "é", "\ufeff"]
)
BASES = [MINIMAL, FULL, COLOCATED]


def loads_or_user_error(text: str) -> Topology | None:
    """The property under test; returns the topology when the text is valid."""
    try:
        return load_topology_text(text, source="fuzz.yaml")
    except UserError as exc:
        assert str(exc).startswith("fuzz.yaml"), str(exc)
        assert exc.exit_code == 2
        return None


@st.composite
def mutated_text(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(BASES))
    for _ in range(draw(st.integers(1, 4))):
        op = draw(st.sampled_from(["insert", "delete", "dup-line", "indent", "swap"]))
        pos = draw(st.integers(0, len(text)))
        if op == "insert":
            text = text[:pos] + draw(st.text(YAML_CHARS, min_size=1, max_size=6)) + text[pos:]
        elif op == "delete":
            text = text[:pos] + text[pos + draw(st.integers(1, 12)):]
        else:
            lines = text.splitlines()
            i = draw(st.integers(0, len(lines) - 1))
            if op == "dup-line":
                lines.insert(i, lines[i])
            elif op == "indent":
                lines[i] = " " * draw(st.integers(0, 5)) + lines[i].lstrip()
            else:
                j = draw(st.integers(0, len(lines) - 1))
                lines[i], lines[j] = lines[j], lines[i]
            text = "\n".join(lines) + "\n"
    return text


@FUZZ
@given(mutated_text())
def test_malformed_yaml_text(text: str) -> None:
    loads_or_user_error(text)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _paths(v, prefix + (i,))
    return out


SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.sampled_from([0, -1, 1, 65536, 10**400]),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8),
    st.sampled_from(["nixl", "gb300", "p0", "d0", "n0", "auto", "nhd", "", "0.5.23", "true", "pd", "colocated"]),
)
VALUES = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.text(max_size=6), inner, max_size=3), max_leaves=6)


@FUZZ
@given(st.sampled_from(BASES), st.data())
def test_wrong_typed_values(base: str, data: st.DataObject) -> None:
    doc = yaml.safe_load(base)
    path = data.draw(st.sampled_from(_paths(doc)[1:]))
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    action = data.draw(st.sampled_from(["replace", "replace", "delete", "add-key"]))
    if action == "replace":
        parent[path[-1]] = data.draw(VALUES)
    elif action == "delete":
        del parent[path[-1]]
    elif isinstance(parent, dict):
        parent[data.draw(st.text(max_size=8))] = data.draw(VALUES)
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True)
    except (yaml.YAMLError, ValueError):  # e.g. a 400-digit int pyyaml refuses to print
        return
    topo = loads_or_user_error(text)
    if topo is not None:  # valid after the mutation: values must still be sane
        assert topo.roles() and all(r.name in {"prefill", "decode", "colocated"} for r in topo.roles())
        assert (topo.colocated is not None) == (topo.mode == "colocated") != (topo.prefill is not None)
        topo.router_node  # noqa: B018 - resolves (the router node default is always a defined node)
        for role in topo.roles():
            assert role.tp >= 1 and role.pp >= 1 and role.replicas >= 1 and 1 <= role.port <= 65535
        assert topo.eval.parity.tolerance >= 0 and not math.isnan(topo.eval.parity.tolerance)
