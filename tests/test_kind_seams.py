"""One seam per executor kind (docs/ARCHITECTURE.md, "Adding a thing"): outside pdctl/executors/ and the kind
descriptors (pdctl/render/kinds.py), no code compares anything with an executor kind's name. The shared code
asks the kind (pdctl.render.kinds.KINDS / PROCESS_KINDS: capabilities and refusals as data;
pdctl.executors.NODE_EXECUTORS / PROCESS_EXECUTORS: the executor protocol), so a new kind is its own modules
plus its registry entries, not a hunt for `if kind == ...` sites.

The guard reads every module's AST: a comparison (==, !=, in, not in, is) with a kind's name as a string
literal, or a `match` case on one, is a branch by name. It is also shown saying no.
"""

from __future__ import annotations

import ast
from pathlib import Path

from pdctl.render.kinds import KINDS, PROCESS_KINDS
from tests.support.paths import REPO

# Where the names may be compared: the kinds' own code.
OWNERS = ("pdctl/executors/", "pdctl/render/kinds.py")
# Comparisons with the same word that are not about the executor kind, each with why.
NOT_A_KIND = {
    ("pdctl/topology/profile.py", "'slurm' in data"): "a cluster profile's slurm: section (a topology key)",
    ("pdctl/topology/validation.py", "parent == ('slurm',)"): "the hint for a misspelt key of the slurm: section",
}


def kind_names() -> set[str]:
    """Every name a kind is known by: the kinds, their aliases, their kinds of process."""
    return {name for k in KINDS.values() for name in (k.name, *k.aliases)} | set(PROCESS_KINDS)


def _literals(node: ast.AST | None) -> set[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return {node.value}
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return {s for e in node.elts for s in _literals(e)}
    if isinstance(node, ast.MatchValue):
        return _literals(node.value)
    if isinstance(node, ast.MatchOr):
        return {s for p in node.patterns for s in _literals(p)}
    return set()


def name_branches(source: str, names: set[str]) -> list[tuple[int, str]]:
    """(line, code) of every comparison with, or match case on, one of NAMES in SOURCE."""
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare) and any(names & _literals(side) for side in (node.left, *node.comparators)):
            out.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.match_case) and names & _literals(node.pattern):
            out.append((node.pattern.lineno, f"case {ast.unparse(node.pattern)}"))
    return out


def branches_outside_the_kinds(root: Path) -> list[str]:
    names = kind_names()
    found = []
    for path in sorted((root / "pdctl").rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith(OWNERS):
            continue
        for line, code in name_branches(path.read_text(encoding="utf-8"), names):
            if (rel, code) not in NOT_A_KIND:
                found.append(f"{rel}:{line}: {code}")
    return found


def test_no_executor_kind_is_branched_by_name_outside_its_own_code() -> None:
    assert kind_names() >= {"local", "ssh", "slurm", "srun", "kubernetes"}
    found = branches_outside_the_kinds(REPO)
    assert not found, ("branch on an executor kind's name outside pdctl/executors/ and pdctl/render/kinds.py; "
                       "ask the kind instead (a capability on its Kind/ProcessKind, a member of the executor "
                       "protocol):\n" + "\n".join(found))


def test_every_exception_is_still_there() -> None:
    """An allowed comparison that no longer exists is removed from NOT_A_KIND (the list does not rot)."""
    names = kind_names()
    for rel, code in NOT_A_KIND:
        assert code in {c for _, c in name_branches((REPO / rel).read_text(encoding="utf-8"), names)}, (rel, code)


def test_the_guard_says_no_to_a_branch_by_name(tmp_path: Path) -> None:
    """A copy of pdctl with `if record.get("executor") == "srun"` in liveness, a membership test in runs and a
    match case in the launcher: each is named, with its line."""
    copy = tmp_path / "repo"
    for rel in ("pdctl/liveness.py", "pdctl/runs/state.py", "pdctl/launch/deploy.py", "pdctl/executors/base.py"):
        (copy / rel).parent.mkdir(parents=True, exist_ok=True)
        (copy / rel).write_text((REPO / rel).read_text(encoding="utf-8"), encoding="utf-8")
    assert branches_outside_the_kinds(copy) == []
    with (copy / "pdctl/liveness.py").open("a") as f:
        f.write('\n\ndef _by_name(record):\n    return record.get("executor") == "srun"\n')
    with (copy / "pdctl/runs/state.py").open("a") as f:
        f.write('\n\ndef _by_names(kind):\n    return kind not in ("kubernetes", "slurm")\n')
    with (copy / "pdctl/launch/deploy.py").open("a") as f:
        f.write('\n\ndef _matched(kind):\n    match kind:\n        case "ssh" | "local":\n            return 1\n'
                '    return 0\n')
    with (copy / "pdctl/executors/base.py").open("a") as f:  # the kinds' own code may
        f.write('\n\ndef _own(kind):\n    return kind == "ssh"\n')
    found = branches_outside_the_kinds(copy)
    assert [f.split(": ", 1)[1] for f in found] == [
        "case 'ssh' | 'local'",
        "record.get('executor') == 'srun'",
        "kind not in ('kubernetes', 'slurm')",
    ], found
    assert all(f.split(":")[1].isdigit() for f in found)
