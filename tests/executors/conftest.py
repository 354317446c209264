"""Executor tests run in a temporary directory (tests/support/workdir.py)."""

from tests.support.workdir import in_tmp_dir

__all__ = ["in_tmp_dir"]
