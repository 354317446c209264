"""pdctl's parser over a flag table against SGLang's own argparse parser, on random command lines, for the side
venv's release (0.5.23) and for older ones run from their overlays (tests/support/sglang_env.py::ORACLE_RELEASES).

Both sides get the same argv: valid flags with valid values, aliases and unique prefixes, `--flag=value`,
BooleanOptional `--no-` forms, bad choices, bad numbers, misspelt and removed flags. They must agree on
accept / reject, and on every value pdctl reads. Each older release's table must also BE its parser: the
release's own `ServerArgs.add_cli_args`, dumped in the test by the generator's code, equals the shipped table."""

from __future__ import annotations

import json
import random

import pytest

from pdctl.sglang.argv import PARTLY_CHECKED, parse_argv
from pdctl.sglang.table import Flag, FlagTable, load_table
from pdctl.sglang.versions import TABLE_DIR
from tests.support.sglang_env import ORACLE_RELEASES, release_worker

pytestmark = pytest.mark.e2e  # starts the SGLang side interpreter

RELEASES = ("0.5.23", *ORACLE_RELEASES)


@pytest.fixture(scope="module", params=RELEASES)
def release_oracle(request: pytest.FixtureRequest, sglang_python: str):
    """(release, SGLang's parser of that release): 0.5.23 is the side venv's own, older ones its overlay."""
    yield from release_worker(request.param, sglang_python, "sglang_parser_oracle.py")


def value_for(rng: random.Random, flag: Flag) -> str:
    if flag.choices:
        return str(rng.choice(flag.choices))
    if flag.type == "int" or flag.type.endswith("human_readable_int"):
        return str(rng.choice([0, 1, 7, 64, 8192]))
    if flag.type == "float":
        return rng.choice(["0.5", "1", "0.85"])
    if flag.type.endswith("json.loads") or flag.type.endswith("json_list_type"):
        return rng.choice(['{"a": 1}', "[1, 2]"])
    return rng.choice(["x", "model/path", "abc"])


def random_argv(rng: random.Random, table: FlagTable) -> list[str]:
    argv: list[str] = [] if rng.random() < 0.03 else ["--model-path", "m"]  # required by SGLang
    plain = [f for f in table.flags if not f.kind.startswith(("Deprecated", "LoRA"))
             and not f.type.endswith(PARTLY_CHECKED)]
    for _ in range(rng.randint(1, 5)):
        flag = rng.choice(plain)
        option = rng.choice(flag.options)
        roll = rng.random()
        if roll < 0.08:
            option = option[:-1] + ("x" if option[-1] != "x" else "y")  # misspelt
        elif roll < 0.16 and len(option) > 8:
            option = option[: rng.randint(5, len(option) - 1)]  # a prefix: unique or ambiguous
        arity = flag.arity
        if arity == 0:
            argv.append(option)
            continue
        count = 1 if arity in (None, 1, "?") else (rng.randint(1, 3) if arity in ("*", "+") else int(arity))
        values = [value_for(rng, flag) for _ in range(count)]
        if rng.random() < 0.08:
            values[0] = rng.choice(["not-a-choice", "x1", "1.5e"])  # a bad choice or number
        if count == 1 and rng.random() < 0.2:
            argv.append(f"{option}={values[0]}")
        else:
            argv += [option, *values]
    if rng.random() < 0.05:
        argv += ["--torchao-config", "int4wo-128"]  # removed in 0.5.18
    return argv


def same(a: object, b: object) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(float(a) - float(b)) < 1e-12
    if isinstance(a, (dict, list)) or isinstance(b, (dict, list)):
        return a == b or repr(a) == b or str(a) == str(b)
    return a == b


def test_parse_argv_agrees_with_sglangs_parser(release_oracle) -> None:
    version, oracle = release_oracle
    table = load_table(version)
    rng = random.Random(11)
    argvs = [random_argv(rng, table) for _ in range(3000)]
    theirs = oracle.ask("parse", argvs)
    bad = []
    for argv, got in zip(argvs, theirs):
        mine = parse_argv(argv, table)
        if bool(mine.problems) != ("error" in got):
            bad.append(f"{argv}: pdctl {[p.message for p in mine.problems]}, SGLang {got.get('error', 'accepts')}")
            continue
        if "error" in got:
            continue
        for dest in mine.given:
            if not same(mine.values[dest], got["values"].get(dest)):
                bad.append(f"{argv}: {dest} pdctl {mine.values[dest]!r}, SGLang {got['values'].get(dest)!r}")
    rejected = sum("error" in g for g in theirs)
    assert 200 < rejected < 2800, rejected  # both kinds of command line were really tried
    assert not bad, f"SGLang {version}: {len(bad)} disagreement(s):\n" + "\n".join(bad[:20])


def unordered(action: dict) -> dict:
    """Choices compared as a set: SGLang takes a few from a Python set, whose order changes per interpreter
    (tables dumped before dump.py sorted them keep the order of the run that made them)."""
    if action.get("choices") is not None:
        return {**action, "choices": sorted(action["choices"], key=repr)}
    return action


def test_the_shipped_table_is_the_releases_parser(release_oracle) -> None:
    """pdctl/sglang/flags/sglang-X.json equals X's `ServerArgs.add_cli_args` dumped now (no stale or edited table)."""
    version, oracle = release_oracle
    [dumped] = oracle.ask("dump", [None])
    shipped = json.loads((TABLE_DIR / f"sglang-{version}.json").read_text(encoding="utf-8"))
    assert dumped["sglang"] == shipped["sglang"] == version
    theirs = {tuple(a["options"]): unordered(a) for a in json.loads(json.dumps(dumped["actions"]))}
    ours = {tuple(a["options"]): unordered(a) for a in shipped["actions"]}
    assert sorted(theirs) == sorted(ours)
    differ = [o for o in ours if ours[o] != theirs[o]]
    assert not differ, f"SGLang {version}: {len(differ)} flag(s) differ from the table: {differ[:5]}"
