"""Where things are in the checkout, for every test: the repository root, example configs, test data."""

from __future__ import annotations

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONFIGS_DIR = REPO / "configs"
DATA = REPO / "tests" / "data"
