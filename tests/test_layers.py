"""The architecture is checked, not hoped for (docs/ARCHITECTURE.md):

- import-linter's contracts (pyproject.toml [tool.importlinter]): one-way layers, no import cycle between
  sibling modules or packages at any depth, the verdicts never call the renderer, the CLI's and the verdicts'
  packages import no heavy library. grimp reads every import, those inside functions too;
- no function-level import of a pdctl module below the CLI, unless the module it imports loads a heavy library
  at import time (a lazy import must not hide an edge that would run back up);
- vulture finds no dead code in pdctl or its tests (pyproject.toml [tool.vulture]; vulture_whitelist.py names
  what only a framework calls).

Each guard is also shown saying no: a copy of the package with one import that runs back up, a dead function.
"""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO

BIN = Path(sys.executable).parent
CONTRACTS = 4
# (module, imported) pairs allowed inside functions below the CLI, each with why
LAZY_ALLOWED = {
    ("pdctl.preflight.probe", "pdctl"): "the probe runs alone on the nodes: pdctl there may be missing or broken",
    ("pdctl.reference.__main__", "pdctl.reference.server"): "torch and fastapi, after the cheap checks",
    ("pdctl.bench.transfer.remote", "pdctl.bench.transfer.run"): "numpy, in the process started on the node",
}


def lint_imports(cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    env = {"PATH": f"{BIN}:/usr/bin:/bin", **({"PYTHONPATH": str(pythonpath)} if pythonpath else {})}
    return subprocess.run([str(BIN / "lint-imports"), "--no-cache"], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600, check=False)


def test_the_import_contracts_hold() -> None:
    done = lint_imports(REPO)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]
    assert f"Contracts: {CONTRACTS} kept, 0 broken." in done.stdout  # every contract ran


def test_an_import_that_runs_back_up_breaks_them(tmp_path: Path) -> None:
    """check-compat importing the launcher (the loop this redesign removed) fails the layers, the cycle and the
    render-once contracts, naming the import."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "pdctl", copy / "pdctl", ignore=shutil.ignore_patterns("__pycache__", "flags"))
    shutil.copy(REPO / "pyproject.toml", copy / "pyproject.toml")
    context = copy / "pdctl" / "compat" / "context.py"
    context.write_text(context.read_text() + "\n\ndef _back_up():\n    from pdctl.launch import deploy\n\n"
                       "    return deploy\n")
    done = lint_imports(copy, pythonpath=copy)
    assert done.returncode != 0
    assert "pdctl.compat.context -> pdctl.launch.deploy" in done.stdout
    assert f"Contracts: {CONTRACTS - 3} kept, 3 broken." in done.stdout, done.stdout[-4000:]


def _module(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def lazy_pdctl_imports(root: Path) -> list[tuple[str, str, int]]:
    """(module, imported pdctl module, line) of every import of a pdctl module inside a function, below pdctl.cli."""
    out = []
    for path in sorted(root.rglob("*.py")):
        module = _module(path)
        if module.startswith("pdctl.cli"):
            continue  # the CLI imports its work when the command runs: click parses the options first
        for func in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(func):
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pdctl") and not node.level:
                    out.append((module, node.module or "", node.lineno))
                elif isinstance(node, ast.Import):
                    out += [(module, a.name, node.lineno) for a in node.names if a.name.split(".")[0] == "pdctl"]
    return out


def test_no_import_of_pdctl_hides_inside_a_function_below_the_cli() -> None:
    found = lazy_pdctl_imports(REPO / "pdctl")
    hidden = [f"{m}:{line} imports {i}" for m, i, line in found if (m, i) not in LAZY_ALLOWED]
    assert not hidden, "import these at the top of the module (or say in LAZY_ALLOWED why not):\n" + "\n".join(hidden)
    assert {(m, i) for m, i, _ in found} == set(LAZY_ALLOWED)  # and the allowances are still needed


def test_no_dead_code() -> None:
    done = subprocess.run([str(BIN / "vulture")], cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-2000:]


def test_dead_code_is_found(tmp_path: Path) -> None:
    dead = tmp_path / "dead.py"
    dead.write_text("def used() -> int:\n    return 1\n\n\ndef never_called() -> int:\n    return 2\n\n\nused()\n")
    done = subprocess.run([str(BIN / "vulture"), str(dead)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode != 0 and "unused function 'never_called'" in done.stdout
