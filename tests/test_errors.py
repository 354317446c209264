"""pdctl's error types are raised one way everywhere: the message as the one positional argument, anything
else by keyword (`detail=`). A hint passed positionally (`UserError(message, hint)`) is a TypeError at the
moment the error is raised, so the user gets a traceback instead of the message and its fix (issue 20:
`pdctl bench serve` without SGLang's side venv). This test reads every call site in pdctl/ without running it,
so a misused call fails here even on a path no other test reaches."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from pdctl import errors
from tests.support.paths import REPO

ERROR_TYPES = {name for name, obj in vars(errors).items()
               if inspect.isclass(obj) and issubclass(obj, errors.PdctlError)}
KEYWORDS = {name for name, p in inspect.signature(errors.PdctlError.__init__).parameters.items()
            if p.kind is inspect.Parameter.KEYWORD_ONLY}


def _calls(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None
            if name in ERROR_TYPES:
                yield name, node


def misuses(source: str, where: str) -> list[str]:
    """Calls of pdctl's error types in SOURCE that would raise TypeError (or drop text) when run."""
    bad = []
    for name, call in _calls(ast.parse(source)):
        line = f"{where}:{call.lineno}: {name}(...)"
        if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            bad.append(f"{line}: *args/**kwargs hide what is passed")
        elif len(call.args) != 1:
            bad.append(f"{line}: {len(call.args)} positional arguments; the message is the only one "
                       f"(the rest by keyword: {', '.join(sorted(KEYWORDS))})")
        unknown = [k.arg for k in call.keywords if k.arg is not None and k.arg not in KEYWORDS]
        if unknown:
            bad.append(f"{line}: unknown keyword(s) {', '.join(unknown)}")
    return bad


def test_the_checker_catches_a_positional_hint() -> None:
    assert misuses('raise UserError("msg", "run make sglang-env")', "x.py")
    assert misuses('raise errors.CheckFailed("msg", hint="h")', "x.py")
    assert not misuses('raise UserError("msg", detail="run make sglang-env")', "x.py")
    with pytest.raises(TypeError):  # what such a call does when it runs
        errors.UserError("msg", "hint")  # type: ignore[misc]


def test_every_raise_site_in_pdctl_calls_the_error_types_correctly() -> None:
    sites, bad = 0, []
    for path in sorted((REPO / "pdctl").rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        sites += sum(1 for _ in _calls(ast.parse(source)))
        bad += misuses(source, str(Path(path).relative_to(REPO)))
    assert sites > 150  # the walk really reached the package
    assert not bad, "\n".join(bad)
