import pytest

"""Executor tests run in a temporary directory (tests/support/workdir.py)."""

from tests.support.workdir import in_tmp_dir

__all__ = ["in_tmp_dir"]


@pytest.fixture(scope="module")
def oracle(sglang_python: str):
    """SGLang's own code in the side venv (tests/support/sglang_env.py::Oracle)."""
    from tests.support.sglang_env import Oracle

    worker = Oracle(sglang_python)
    try:
        yield worker
    finally:
        worker.close()
