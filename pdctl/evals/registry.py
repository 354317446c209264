"""The evals `pdctl eval` runs, by name: adding one is an entry here and its module (pdctl.evals.base)."""

from __future__ import annotations

from pdctl.evals.base import Eval
from pdctl.evals.gsm8k import GSM8K

EVALS: dict[str, Eval] = {e.name: e for e in (GSM8K,)}
