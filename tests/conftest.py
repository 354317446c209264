"""Root fixtures: a deterministic reference checkpoint created once per test session."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ref_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The default reference-engine checkpoint (seed 0), created on the fly — no downloads in tests."""
    from pdctl.reference.checkpoint import init_checkpoint

    return init_checkpoint(tmp_path_factory.mktemp("ckpt") / "reference-tiny", seed=0)
