"""The SGLang oracle worker for this package's differential tests: one per module, always closed."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def oracle(sglang_python: str):
    """SGLang's own code in the side venv (tests/support/sglang_env.py::Oracle)."""
    from tests.support.sglang_env import Oracle

    worker = Oracle(sglang_python)
    try:
        yield worker
    finally:
        worker.close()
