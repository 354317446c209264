"""Tests that launch or render run in a temporary directory: a launch records `./.pdctl/latest` and a render
reads the current directory (relative model paths, the sbatch script's --chdir), which must not be the
checkout other tests run in. A conftest takes the fixture in with `from tests.support.workdir import in_tmp_dir`."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
