"""make test's xdist groups (tests/conftest.py): every module a group names exists, and the grouping keeps a
module whole and puts each group's modules together."""

from __future__ import annotations

from tests.conftest import GROUPS, xdist_group
from tests.support.paths import REPO


def test_every_grouped_module_exists() -> None:
    assert all((REPO / module).is_file() for modules in GROUPS.values() for module in modules), GROUPS


def test_a_module_is_one_unit_and_each_groups_modules_are_one_unit() -> None:
    module = "tests/test_clip.py"
    assert xdist_group(f"{module}::test_a[x]") == xdist_group(f"{module}::test_b") == module
    for group, modules in GROUPS.items():
        assert {xdist_group(f"{module}::test_x") for module in modules} == {group}
