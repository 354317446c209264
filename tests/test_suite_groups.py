"""make test's xdist groups (tests/conftest.py): every module named as CPU-heavy exists, and the grouping keeps a
module whole and puts the heavy ones together."""

from __future__ import annotations

from tests.conftest import CPU_HEAVY_MODULES, HEAVY_GROUP, xdist_group
from tests.support.paths import REPO


def test_every_cpu_heavy_module_exists() -> None:
    assert all((REPO / module).is_file() for module in CPU_HEAVY_MODULES), CPU_HEAVY_MODULES


def test_a_module_is_one_unit_and_the_heavy_modules_are_one_group() -> None:
    module = "tests/test_clip.py"
    assert xdist_group(f"{module}::test_a[x]") == xdist_group(f"{module}::test_b") == module
    assert {xdist_group(f"{module}::test_x") for module in CPU_HEAVY_MODULES} == {HEAVY_GROUP}
