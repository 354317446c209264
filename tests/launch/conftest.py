"""Launch tests run in a temporary directory: launches record `./.pdctl/latest`, which must not land in
(and confuse) the checkout other tests run in."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(autouse=True)
def _in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
